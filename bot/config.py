"""Settings, read once from the environment and ``.env``; nothing else reads ``os.environ``."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.errors import SettingsError

#: what to put in a variable, for the one-line error naming it
_HINTS = {
    "SLACK_BOT_TOKEN": "the bot token from your Slack app's OAuth page (xoxb-...)",
    "SLACK_SIGNING_SECRET": "the signing secret from your Slack app's Basic Information page",
    "SLACK_APP_TOKEN": "an app-level token with connections:write (xapp-...)",
    "OPENAI_API_KEY": "your OpenAI API key (or any key your OpenAI-compatible server accepts)",
    "DATABASE_URL": "sqlite:///./bot.db or postgresql://user:password@host:5432/dbname",
    "LLM_API": "chat or responses",
    "OPENAI_DEFAULT_HEADERS": 'a JSON object of header names and values, e.g. {"X-Team": "ops"}',
    "OPENAI_REASONING_EFFORT": "none, minimal, low, medium, high or xhigh",
    "OPENAI_TEMPERATURE": "a number from 0 to 2, e.g. 0.2",
    "LOG_FORMAT": "text or json",
    "WRITE_APPROVAL": "on or off",
    "STREAM_ANSWERS": "on or off",
    "FOLLOW_UPS": "on or off",
    "OTEL_CAPTURE_CONTENT": "on or off",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "your OTLP/HTTP collector, e.g. http://127.0.0.1:4318",
    "JIRA_URL": "your Jira base URL, e.g. https://example.atlassian.net",
    "MCP_CONFIG": "the path of a JSON file in the mcpServers format",
    "MAX_TOOL_ROUNDS": "a whole number from 1 to 50",
    "HISTORY_TOKEN_BUDGET": "a whole number of tokens, e.g. 12000",
    "TOOL_TIMEOUT_S": "a number of seconds, e.g. 30",
    "MODEL_TIMEOUT_S": "a number of seconds, e.g. 60",
    "TURN_DEADLINE_S": "a number of seconds, e.g. 300",
    "APPROVAL_TIMEOUT_S": "a number of seconds, e.g. 86400",
    "RATE_LIMIT_PER_USER": "a whole number of turns per person per 10 minutes (0: no limit)",
    "MAX_CONCURRENT_TURNS": "a whole number of model requests at once, e.g. 32",
    "MAX_OUTPUT_TOKENS": "a whole number of tokens from 16 on, e.g. 16000",
    "HISTORY_RETENTION_DAYS": "a number of days, e.g. 90 (empty: keep everything)",
    "PORT": "a TCP port number, e.g. 3000",
    "FILE_MAX_BYTES": "a whole number of bytes, e.g. 10000000",
    "FILE_TEXT_TOKENS": "a whole number of tokens, e.g. 8000",
    "HOST": "0.0.0.0 (every interface), 127.0.0.1, :: or a host name",
    "LOG_LEVEL": "DEBUG, INFO, WARNING or ERROR",
    "ADMIN_TOKEN": "a random string of at least 32 characters (`openssl rand -hex 32` makes one)",
}
#: an admin token short enough to guess is refused at start-up
ADMIN_TOKEN_MIN_CHARS = 32


_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*")

#: what to do about a choice of settings ("A or B") of which neither is set
_CHOICES = {
    "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET": (
        "choose how Slack reaches the bot: Socket Mode (the manifest's default) with "
        f"{_HINTS['SLACK_APP_TOKEN']} in SLACK_APP_TOKEN, or the HTTP Events API with "
        f"{_HINTS['SLACK_SIGNING_SECRET']} in SLACK_SIGNING_SECRET and `bot run --http`"
    ),
}


def _on_off(value: object) -> object:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in {"on", "true", "1", "yes"}:
            return True
        if lowered in {"off", "false", "0", "no"}:
            return False
    return value


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    """Every setting of docs/interface.md; the field name is the variable's name."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=True,
        # a copied .env.example leaves many settings empty: empty means unset
        env_ignore_empty=True,
    )

    SLACK_BOT_TOKEN: str | None = None
    """Bot token (xoxb-); needed by `run`."""
    SLACK_SIGNING_SECRET: str | None = None
    """Verifies that HTTP requests come from Slack; needed in HTTP mode."""
    SLACK_APP_TOKEN: str | None = None
    """App-level token (xapp-); when set, `run` uses Socket Mode."""
    SLACK_API_URL: str = "https://slack.com/api/"
    """Base URL of every Slack Web API call."""

    OPENAI_API_KEY: str | None = None
    """Key for the model server."""
    OPENAI_BASE_URL: str | None = None
    """Any OpenAI-compatible server; the OpenAI default when unset."""
    OPENAI_MODEL: str = "gpt-5-mini"
    """Model name."""
    LLM_API: Literal["chat", "responses"] = "chat"
    """`chat` (Chat Completions) or `responses` (Responses API)."""
    OPENAI_DEFAULT_HEADERS: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    """Headers sent with every model request (a JSON object), e.g. for a gateway."""
    OPENAI_REASONING_EFFORT: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = (
        None
    )
    """How hard a reasoning model thinks; unset: the server's default (not sent)."""
    OPENAI_TEMPERATURE: float | None = Field(None, ge=0, le=2)
    """Sampling temperature; unset: the server's default (not sent)."""
    MAX_TOOL_ROUNDS: int = Field(5, ge=1, le=50)
    """Tool rounds per turn before the answer is forced."""
    HISTORY_TOKEN_BUDGET: int = Field(12000, ge=0)
    """Most tokens of stored history replayed into one request."""
    TOOL_TIMEOUT_S: float = Field(30, gt=0)
    """One tool call's time limit."""
    MODEL_TIMEOUT_S: float = Field(60, gt=0)
    """One model request's time limit (the SDK's own default is 600 s)."""
    TURN_DEADLINE_S: float = Field(300, gt=0)
    """A whole turn's time limit, all rounds included."""
    RATE_LIMIT_PER_USER: int = Field(20, ge=0)
    """New turns one person may start in any 10 minutes (per process); 0: no limit."""
    MAX_CONCURRENT_TURNS: int = Field(32, ge=1)
    """Model requests in flight at once in one process."""
    MAX_OUTPUT_TOKENS: int = Field(16000, ge=16)
    """The most tokens one model reply may use (reasoning included)."""
    HISTORY_RETENTION_DAYS: float | None = Field(None, gt=0)
    """`bot run` deletes stored messages older than this, daily; unset: kept."""
    SYSTEM_PROMPT: str | None = None
    """The system message; the built-in one when unset."""
    SYSTEM_PROMPT_FILE: Path | None = None
    """A file holding the system message."""

    JIRA_URL: str | None = None
    """Jira base URL; unset = the Jira tools are not offered to the model."""
    JIRA_EMAIL: str | None = None
    """Jira Cloud account email (with JIRA_API_TOKEN)."""
    JIRA_API_TOKEN: str | None = None
    """Jira Cloud API token (with JIRA_EMAIL)."""
    JIRA_PAT: str | None = None
    """Jira Server / Data Center personal access token."""
    JIRA_PROJECT: str | None = None
    """Project key for new tickets when the model names none."""
    JIRA_ALLOWED_PROJECTS: Annotated[list[str] | None, NoDecode] = None
    """Comma list of project keys tickets may be created in; JIRA_PROJECT when unset."""

    MCP_CONFIG: Path | None = None
    """A JSON file of MCP servers (the mcpServers format) whose tools are offered."""

    DATABASE_URL: str = "sqlite:///./bot.db"
    """sqlite:///... or postgresql://...; the async driver is chosen here."""
    HOST: str = "0.0.0.0"
    """The address `bot run` listens on (0.0.0.0: every IPv4 interface)."""
    PORT: int = Field(3000, ge=1, le=65535)
    """HTTP port of the Events API endpoint, /healthz and /admin."""
    ADMIN_TOKEN: str | None = None
    """Enables /admin; unset = /admin answers 404."""
    METRICS_TOKEN: str | None = None
    """Bearer token for /metrics; ADMIN_TOKEN when unset; neither = /metrics answers 404."""
    ADMIN_SLACK_USERS: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Comma list of Slack user IDs who may approve any write."""
    WRITE_APPROVAL: bool = True
    """on: a writing tool waits for the requester's approval; off: it runs at once."""
    APPROVAL_TIMEOUT_S: float = Field(86400, gt=0)
    """An unanswered approval request expires after this."""
    STREAM_ANSWERS: bool = True
    """on: the answer is streamed with Slack's streaming methods as the model writes it,
    each tool call a step of it; off: steps in a live message, the answer posted when done."""
    OTEL_EXPORTER_OTLP_ENDPOINT: str | None = None
    """OTLP/HTTP collector base URL (traces go to its /v1/traces); unset = no tracing."""
    OTEL_SERVICE_NAME: str = "bot"
    """The service name traces carry."""
    OTEL_CAPTURE_CONTENT: bool = False
    """on: spans carry message text, tool arguments and results; off: ids, counts, names."""
    THREAD_CONTEXT_TOKENS: int = Field(4000, ge=0)
    """Most tokens of a thread's earlier messages shown with a question asked in it (0: none)."""
    FOLLOW_UPS: bool = True
    """on: in a thread where the bot answered someone, their next messages there are
    questions without a mention; off: every question needs a mention."""
    FILE_MAX_BYTES: int = Field(10_000_000, ge=0)
    """Largest file attached to a question that is read (an image, a text file)."""
    FILE_TEXT_TOKENS: int = Field(8000, ge=0)
    """Most tokens of a question's text files added to it; the rest is cut, with a note."""
    LOG_LEVEL: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Log level."""
    LOG_FORMAT: Literal["text", "json"] = "text"
    """text, or json for one JSON object a line."""

    _normalise_flags = field_validator(
        "WRITE_APPROVAL", "STREAM_ANSWERS", "FOLLOW_UPS", "OTEL_CAPTURE_CONTENT", mode="before"
    )(lambda cls, v: _on_off(v))
    _normalise_lists = field_validator("JIRA_ALLOWED_PROJECTS", "ADMIN_SLACK_USERS", mode="before")(
        lambda cls, v: _comma_list(v)
    )

    @field_validator("OPENAI_DEFAULT_HEADERS", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("not valid JSON") from None

    @field_validator("ADMIN_TOKEN")
    @classmethod
    def _long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < ADMIN_TOKEN_MIN_CHARS:
            raise ValueError(f"shorter than {ADMIN_TOKEN_MIN_CHARS} characters")
        return value

    @field_validator("LOG_LEVEL", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("HOST")
    @classmethod
    def _address(cls, value: str) -> str:
        value = value.strip()
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not _HOST_NAME.fullmatch(value):
                raise ValueError("not an IP address or a host name") from None
        return value

    @field_validator("DATABASE_URL")
    @classmethod
    def _known_database(cls, value: str) -> str:
        async_database_url(value)
        return value

    @property
    def async_database_url(self) -> str:
        return async_database_url(self.DATABASE_URL)

    @property
    def allowed_projects(self) -> list[str]:
        if self.JIRA_ALLOWED_PROJECTS:
            return [p.upper() for p in self.JIRA_ALLOWED_PROJECTS]
        return [self.JIRA_PROJECT.upper()] if self.JIRA_PROJECT else []

    def require(self, *names: str) -> None:
        """Raise one SettingsError naming every one of ``names`` that is unset. A name may be
        a choice, ``"A or B"``: it is met when either is set."""
        missing = [name for name in names if not any(map(self._is_set, name.split(" or ")))]
        if len(missing) == 1 and " or " not in missing[0]:
            name = missing[0]
            raise SettingsError(f"{name} is not set: put {_hint(name)} in it (or in .env).")
        if missing:
            todo = "; ".join(_todo(name) for name in missing)
            if len(missing) == 1:  # a choice
                what = "neither {} nor {} is set".format(*missing[0].split(" or "))
            else:
                what = _listed([f"either {n}" if " or " in n else n for n in missing])
                what += " are not set"
            raise SettingsError(f"{what}: {todo} (in the environment or .env).")

    def _is_set(self, name: str) -> bool:
        return bool(getattr(self, name))

    def system_prompt(self, default: str) -> str:
        if self.SYSTEM_PROMPT:
            return self.SYSTEM_PROMPT
        if self.SYSTEM_PROMPT_FILE:
            try:
                return self.SYSTEM_PROMPT_FILE.read_text(encoding="utf-8")
            except OSError as exc:
                raise SettingsError(
                    f"SYSTEM_PROMPT_FILE cannot be read ({exc.strerror}): "
                    "put the path of a readable text file in it."
                ) from None
        return default


def async_database_url(url: str) -> str:
    """``sqlite:///x`` -> ``sqlite+aiosqlite:///x``; ``postgresql://`` -> ``+asyncpg``."""
    scheme, sep, rest = url.partition("://")
    base = scheme.split("+", 1)[0].lower()
    if not sep or base not in {"sqlite", "postgresql", "postgres"}:
        raise ValueError("must start with sqlite:/// or postgresql://")
    if base == "sqlite":
        return f"sqlite+aiosqlite://{rest}"
    return f"postgresql+asyncpg://{rest}"


def _hint(name: str) -> str:
    return _HINTS.get(name, "a value")


def _todo(name: str) -> str:
    return _CHOICES.get(name) or f"put {_hint(name)} in {name}"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


class _LogFormat(BaseSettings):
    model_config = Settings.model_config
    LOG_FORMAT: str = "text"


def requested_log_format() -> str:
    """LOG_FORMAT alone (``json`` or ``text``), for reporting that the other settings are
    wrong in the format the logs would have had."""
    try:
        return "json" if _LogFormat().LOG_FORMAT == "json" else "text"
    except ValidationError:
        return "text"


def load_settings(**overrides: object) -> Settings:
    """Read the settings once; a malformed one becomes a one-line SettingsError."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems: dict[str, str] = {}
        for error in exc.errors():
            name, *inside = [str(part) for part in error["loc"]] or ["a setting"]
            reason = error["msg"].removeprefix("Value error, ")
            problems.setdefault(name, f"{'.'.join(inside)}: {reason}" if inside else reason)
        if len(problems) == 1:
            ((name, reason),) = problems.items()
            message = f"{name} is invalid ({reason}): put {_hint(name)} in it."
        else:
            each = "; ".join(f"{n} ({why}): put {_hint(n)} in it" for n, why in problems.items())
            message = f"{_listed(list(problems))} are invalid: {each}."
        raise SettingsError(message) from None
