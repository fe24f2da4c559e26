"""What every Jira tool checks of its arguments before it asks Jira anything: an issue key's
shape, and whether a project may be written to (JIRA_ALLOWED_PROJECTS, else JIRA_PROJECT);
and how Jira's people and names are shown to the model."""

from __future__ import annotations

import re
from typing import Any

from bot.config import JiraSettings
from bot.errors import ToolError
from bot.tools.jira.errors import trim

ISSUE_KEY = re.compile(r"^[A-Z][A-Z0-9_]*-[1-9][0-9]*$")
NAME_LIMIT = 100


def parse_key(value: str) -> str:
    """The issue key ``value`` names (upper case); ToolError when it is none."""
    key = value.strip().upper()
    if not ISSUE_KEY.match(key):
        raise ToolError(f"'{value[:40]}' is not a Jira issue key; keys look like TASK-123.")
    return key


def allowed_project(settings: JiraSettings, project_key: str | None) -> str:
    """The project a new issue goes in: the one named, or the default; ToolError when it is
    not allowed."""
    allowed = settings.allowed_projects
    if not allowed:
        raise ToolError(
            "Creating Jira issues is disabled: no project is allowed. An admin can set "
            "JIRA_PROJECT or JIRA_ALLOWED_PROJECTS."
        )
    project = (project_key or settings.JIRA_PROJECT or "").strip().upper()
    if not project:
        if len(allowed) == 1:
            return allowed[0]
        raise ToolError(f"Say which project to use: one of {', '.join(allowed)}.")
    if project not in allowed:
        raise ToolError(
            f"Creating issues in project {project[:30]} is not allowed. "
            f"Allowed projects: {', '.join(allowed)}."
        )
    return project


def writable_issue(settings: JiraSettings, value: str) -> str:
    """The key of an existing issue the bot may change: its project is one of the allowed
    ones; ToolError otherwise (nothing is asked of Jira)."""
    key = parse_key(value)
    allowed = settings.allowed_projects
    if not allowed:
        raise ToolError(
            "Changing Jira issues is disabled: no project is allowed. An admin can set "
            "JIRA_PROJECT or JIRA_ALLOWED_PROJECTS."
        )
    project = key.rpartition("-")[0]
    if project not in allowed:
        raise ToolError(
            f"Changing issues in project {project[:30]} is not allowed ({key}). "
            f"Allowed projects: {', '.join(allowed)}."
        )
    return key


def not_found(key: str) -> ToolError:
    """What the model is told of an issue Jira does not show (404)."""
    return ToolError(f"Issue {key} does not exist or you do not have permission to see it.")


def name_of(value: Any) -> str | None:
    """A status's, type's or priority's name."""
    if isinstance(value, dict):
        return trim(value.get("name"), NAME_LIMIT)
    return None


def person_of(value: Any) -> str | None:
    """A Jira user's display name."""
    if isinstance(value, dict):
        return trim(value.get("displayName") or value.get("name"), NAME_LIMIT)
    return None


def same(a: str | None, b: str | None) -> bool:
    """Two names Jira would take for the same (case and spacing aside)."""
    return " ".join((a or "").split()).casefold() == " ".join((b or "").split()).casefold()
