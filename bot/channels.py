"""A channel's own settings, set by admins: the keys, how a value is checked, and what the
turn reads of them (ChannelSettings).

Values are kept as the text an admin gives (``on``, ``jira_get_issue,crm_*``), so what is
shown, stored and recorded in the changes reads the same everywhere; ``ChannelSettings.of``
makes them typed. Pure: no database, no shell.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.messages import iso

#: every key, in the order they are shown
KEYS = ("instructions", "tools", "jira_project", "write_approval", "answer_all", "follow_ups")
SWITCHES = frozenset({"write_approval", "answer_all", "follow_ups"})
#: who changed a setting
BY_CLI, BY_ADMIN = "cli", "admin"
INSTRUCTIONS_MAX_CHARS = 4_000
TOOLS_MAX_CHARS = 1_000
_ON, _OFF = ("on", "true", "yes", "1"), ("off", "false", "no", "0")


class BadChannelSetting(ValueError):
    """An unknown key or a value it does not take; the message names it, in one line."""


@dataclass(frozen=True)
class ChannelSettings:
    """What one channel's turns read of its settings; None (or empty): not set there, the
    bot's own setting holds."""

    instructions: str | None = None
    #: tool names or shell-style patterns: only the tools they match are offered
    tools: tuple[str, ...] | None = None
    jira_project: str | None = None
    write_approval: bool | None = None
    answer_all: bool = False
    follow_ups: bool | None = None
    #: the values as set (the text form), for documents
    values: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, values: Mapping[str, str]) -> ChannelSettings:
        """The typed settings of stored values (checked when they were set)."""
        known = {k: v for k, v in values.items() if k in KEYS}
        tools = known.get("tools")
        return cls(
            instructions=known.get("instructions") or None,
            tools=tuple(_patterns(tools)) if tools is not None else None,
            jira_project=known.get("jira_project") or None,
            write_approval=_switch(known["write_approval"]) if "write_approval" in known else None,
            answer_all=_switch(known.get("answer_all", "off")),
            follow_ups=_switch(known["follow_ups"]) if "follow_ups" in known else None,
            values=dict(known),
        )

    def offers(self, tool_name: str) -> bool:
        """Whether the channel's turns may be offered (and run) ``tool_name``."""
        if self.tools is None:
            return True
        return any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in self.tools)

    def approval(self, default: bool) -> bool:
        """Whether a write waits for a person's approval in this channel: its own
        ``write_approval`` when set, else ``default`` (WRITE_APPROVAL)."""
        return self.write_approval if self.write_approval is not None else default

    def argument_defaults(self) -> dict[str, str]:
        """The settings a tool may take a default argument from (see ``tool(defaults=)``)."""
        return {"jira_project": self.jira_project} if self.jira_project else {}


#: the settings of a channel that has none
NO_SETTINGS = ChannelSettings()


@dataclass(frozen=True)
class SettingChange:
    """One change of one key: its new value (None: unset), who made it and when."""

    key: str
    value: str | None
    by: str
    at: datetime


def checked(key: str, raw: object, allowed_projects: Sequence[str]) -> str:
    """The value to store for ``key``, from what an admin gave; BadChannelSetting naming
    what is wrong. ``allowed_projects``: JIRA_ALLOWED_PROJECTS (or JIRA_PROJECT)."""
    if key not in KEYS:
        raise BadChannelSetting(f"unknown channel setting {key!r}: the keys are {', '.join(KEYS)}")
    if key in SWITCHES:
        if isinstance(raw, bool):
            return "on" if raw else "off"
        text = str(raw).strip().lower() if isinstance(raw, str) else None
        if text not in _ON + _OFF:
            raise BadChannelSetting(f"{key} must be on or off, not {_shown(raw)}")
        return "on" if text in _ON else "off"
    if key == "tools":
        items = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else None
        if items is None or not all(isinstance(i, str) for i in items):
            raise BadChannelSetting(f"tools must be comma-separated tool names, not {_shown(raw)}")
        patterns = _patterns(",".join(items))
        if not patterns:
            raise BadChannelSetting("tools needs at least one tool name or pattern")
        text = ",".join(patterns)
        if len(text) > TOOLS_MAX_CHARS or any(not _is_pattern(p) for p in patterns):
            raise BadChannelSetting(f"tools holds something that is no tool name: {_shown(raw)}")
        return text
    if not isinstance(raw, str):
        raise BadChannelSetting(f"{key} must be text, not {_shown(raw)}")
    if key == "jira_project":
        project = raw.strip().upper()
        if project not in allowed_projects:
            allowed = ", ".join(allowed_projects) or "none"
            raise BadChannelSetting(
                f"jira_project {_shown(raw)} is not allowed by JIRA_ALLOWED_PROJECTS "
                f"(allowed: {allowed})"
            )
        return project
    text = raw.strip()
    if not text:
        raise BadChannelSetting("instructions is empty: unset it instead")
    if len(text) > INSTRUCTIONS_MAX_CHARS:
        raise BadChannelSetting(f"instructions is longer than {INSTRUCTIONS_MAX_CHARS} characters")
    return text


def checked_all(
    changes: Mapping[str, object], allowed_projects: Sequence[str]
) -> dict[str, str | None]:
    """Every change checked (None unsets a key); the first bad one raises, so nothing of a
    command with one is applied."""
    result: dict[str, str | None] = {}
    for key, raw in changes.items():
        if key not in KEYS:
            checked(key, "", allowed_projects)  # raises, naming the key
        result[key] = None if raw is None else checked(key, raw, allowed_projects)
    return result


def unmatched(tools: str | None, names: Iterable[str]) -> list[str]:
    """The patterns of a ``tools`` value that match none of ``names`` (a warning: an MCP
    server may be down)."""
    if tools is None:
        return []
    known = list(names)
    return [p for p in _patterns(tools) if not fnmatch.filter(known, p)]


def channel_document(
    channel_id: str,
    values: Mapping[str, str],
    changes: Sequence[SettingChange] | None = None,
) -> dict[str, Any]:
    """``bot channels show --json`` (``changes`` None: an entry of ``list --json``)."""
    document: dict[str, Any] = {
        "channel_id": channel_id,
        "settings": {k: values[k] for k in KEYS if k in values},
    }
    if changes is not None:
        document["changes"] = [
            {"key": c.key, "value": c.value, "by": c.by, "at": iso(c.at)} for c in changes
        ]
    return document


def _patterns(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _is_pattern(pattern: str) -> bool:
    return all(c.isalnum() or c in "_-.*?[]!" for c in pattern)


def _switch(text: str) -> bool:
    return text == "on"


def _shown(raw: object) -> str:
    text = repr(raw)
    return text if len(text) <= 60 else text[:59] + "…"
