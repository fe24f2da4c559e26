"""Settings, read once from the environment and ``.env``; nothing else reads ``os.environ``.

They come in groups (bot.config.groups: Slack, the model, limits, the conversation, Jira,
the CRM, MCP, the store, the web side, telemetry), and ``Settings`` holds one of each; a
component is given only the group (or the values) it reads. The variables keep their flat
names (``SLACK_BOT_TOKEN``): they are read in one pass, by a BaseSettings made of every
group's fields and validators, so that every malformed one is named at once.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.config.groups import (
    ADMIN_TOKEN_MIN_CHARS,
    ConversationSettings,
    CrmSettings,
    JiraSettings,
    LimitSettings,
    McpSettings,
    ModelSettings,
    SettingsGroup,
    SlackSettings,
    StoreSettings,
    TelemetrySettings,
    WebSettings,
    async_database_url,
)
from bot.errors import SettingsError

__all__ = [
    "ADMIN_TOKEN_MIN_CHARS",
    "ConversationSettings",
    "CrmSettings",
    "JiraSettings",
    "LimitSettings",
    "McpSettings",
    "ModelSettings",
    "Settings",
    "SlackSettings",
    "StoreSettings",
    "TelemetrySettings",
    "WebSettings",
    "async_database_url",
    "hint",
    "load_settings",
    "requested_log_format",
]


class Settings(BaseModel):
    """Every setting of the bot, one group each; ``settings.slack.SLACK_BOT_TOKEN``. Its
    groups are in the order their problems are reported."""

    model_config = ConfigDict(frozen=True)

    slack: SlackSettings
    model: ModelSettings
    limits: LimitSettings
    conversation: ConversationSettings
    jira: JiraSettings
    crm: CrmSettings
    mcp: McpSettings
    store: StoreSettings
    web: WebSettings
    telemetry: TelemetrySettings

    @staticmethod
    def names() -> list[str]:
        """Every variable, group by group."""
        return list(_GROUP_OF)

    def require(self, *names: str) -> None:
        """Raise one SettingsError naming every one of ``names`` that is unset. A name may be
        a choice, ``"A or B"``: it is met when either is set."""
        missing = [name for name in names if not any(map(self._is_set, name.split(" or ")))]
        if len(missing) == 1 and " or " not in missing[0]:
            name = missing[0]
            raise SettingsError(f"{name} is not set: put {hint(name)} in it (or in .env).")
        if missing:
            todo = "; ".join(_todo(name) for name in missing)
            if len(missing) == 1:  # a choice
                what = "neither {} nor {} is set".format(*missing[0].split(" or "))
            else:
                what = _listed([f"either {n}" if " or " in n else n for n in missing])
                what += " are not set"
            raise SettingsError(f"{what}: {todo} (in the environment or .env).")

    def _is_set(self, name: str) -> bool:
        return bool(getattr(getattr(self, _GROUP_OF[name]), name))


#: the groups by their names in Settings
_GROUPS: dict[str, type[SettingsGroup]] = {
    name: cast(type[SettingsGroup], field.annotation)
    for name, field in Settings.model_fields.items()
}
#: each variable's group
_GROUP_OF = {name: group for group, fields in _GROUPS.items() for name in fields.model_fields}
_POSITION = {name: at for at, name in enumerate(_GROUP_OF)}


def hint(name: str) -> str:
    """What to put in the variable ``name``, for a line naming it."""
    group = _GROUP_OF.get(name)
    described = group and _GROUPS[group].model_fields[name].description
    return described or "a value"


#: what to do about a choice of settings ("A or B") of which neither is set
_CHOICES = {
    "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET": (
        "choose how Slack reaches the bot: Socket Mode (the manifest's default) with "
        f"{hint('SLACK_APP_TOKEN')} in SLACK_APP_TOKEN, or the HTTP Events API with "
        f"{hint('SLACK_SIGNING_SECRET')} in SLACK_SIGNING_SECRET and `bot run --http`"
    ),
}


def _todo(name: str) -> str:
    return _CHOICES.get(name) or f"put {hint(name)} in {name}"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


class _Reading(BaseSettings):
    """How the variables are read: by name (case matters), from the environment, then
    ``.env``."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=True,
        # a copied .env.example leaves many settings empty: empty means unset
        env_ignore_empty=True,
    )


#: every variable, read in one pass, each with its group's field and validators
_BASES: tuple[type[BaseModel], ...] = (*_GROUPS.values(), _Reading)
# a tuple display, not the name: pydantic's mypy plugin would take a named tuple for a class
_Variables = create_model("_Variables", __base__=(*_BASES,))


class _LogFormat(_Reading):
    LOG_FORMAT: str = "text"


def requested_log_format() -> str:
    """LOG_FORMAT alone (``json`` or ``text``), for reporting that the other settings are
    wrong in the format the logs would have had."""
    try:
        return "json" if _LogFormat().LOG_FORMAT == "json" else "text"
    except ValidationError:
        return "text"


def load_settings(**overrides: Any) -> Settings:
    """Read the settings once; a malformed one becomes a one-line SettingsError (naming
    every one that is). ``overrides`` are variables by name, or pydantic-settings' own
    arguments (``_env_file``)."""
    unknown = [name for name in overrides if name not in _GROUP_OF and not name.startswith("_")]
    if unknown:
        raise TypeError(f"no such setting: {', '.join(unknown)}")
    try:
        read = _Variables(**overrides)
    except ValidationError as exc:
        raise SettingsError(_invalid(exc.errors())) from None
    # each group an object of its own, holding its fields only
    return Settings.model_validate(
        {group: _part(read, fields) for group, fields in _GROUPS.items()}
    )


def _part(read: BaseModel, group: type[SettingsGroup]) -> SettingsGroup:
    return group.model_validate({name: getattr(read, name) for name in group.model_fields})


def _invalid(errors: list[Any]) -> str:
    problems: dict[str, str] = {}
    for error in errors:
        name, *inside = [str(part) for part in error["loc"]] or ["a setting"]
        reason = error["msg"].removeprefix("Value error, ")
        problems.setdefault(name, f"{'.'.join(inside)}: {reason}" if inside else reason)
    # in the order of Settings.names(), group by group
    names = sorted(problems, key=lambda n: _POSITION.get(n, len(_POSITION)))
    if len(names) == 1:
        (name,) = names
        return f"{name} is invalid ({problems[name]}): put {hint(name)} in it."
    each = "; ".join(f"{n} ({problems[n]}): put {hint(n)} in it" for n in names)
    return f"{_listed(names)} are invalid: {each}."
