"""The Jira tools: read an issue, search with JQL, create an issue in an allowed project."""

from __future__ import annotations

import json
import logging
import re
import secrets
from typing import Any

from bot.config import JiraSettings
from bot.errors import ToolError
from bot.tools.jira.client import JiraConnection, deadline
from bot.tools.jira.create import issue_fields, recover_create
from bot.tools.jira.errors import NotFound, OutcomeUnknown, trim
from bot.tools.tool import tool

log = logging.getLogger(__name__)

DESCRIPTION_LIMIT = 2_000
SUMMARY_LIMIT = 300
NAME_LIMIT = 100
MAX_SEARCH_RESULTS = 20

ISSUE_KEY = re.compile(r"^[A-Z][A-Z0-9_]*-[1-9][0-9]*$")
_ISSUE_FIELDS = [
    "summary",
    "status",
    "issuetype",
    "priority",
    "assignee",
    "reporter",
    "created",
    "updated",
    "description",
]
_SEARCH_FIELDS = ["summary", "status", "assignee"]


class JiraTools(JiraConnection):
    """The Jira tools; register with ``ToolRegistry.add_object(JiraTools(jira, time_limit))``.
    The connection (client.py) is created on first use."""

    @tool(progress="Looking up {issue_key} in Jira")
    def jira_get_issue(self, issue_key: str) -> dict[str, Any]:
        """Read one Jira issue: summary, status, type, priority, people, dates, description.

        Use it whenever the user mentions an issue key; never describe an issue you have not
        read. Descriptions longer than 2,000 characters are cut.

        Args:
            issue_key: the issue key, e.g. "TASK-123".
        """
        key = _issue_key(issue_key)
        with deadline(self.time_limit):
            client = self.client()
            try:
                issue = self.call(
                    lambda: client.issue(key, fields=",".join(_ISSUE_FIELDS)),
                    action=f"read {key}",
                    bad_request="request",
                )
            except NotFound:
                raise ToolError(
                    f"Issue {key} does not exist or you do not have permission to see it."
                ) from None
        raw = issue.raw or {}
        fields = raw.get("fields") or {}
        real_key = raw.get("key") or key
        return {
            "key": real_key,
            "summary": trim(fields.get("summary"), SUMMARY_LIMIT),
            "status": _name(fields.get("status")),
            "issue_type": _name(fields.get("issuetype")),
            "priority": _name(fields.get("priority")),
            "assignee": _person(fields.get("assignee")),
            "reporter": _person(fields.get("reporter")),
            "created": fields.get("created"),
            "updated": fields.get("updated"),
            "description": trim(_text(fields.get("description")), DESCRIPTION_LIMIT),
            "url": self.issue_url(real_key),
        }

    @tool(progress="Searching Jira: {jql}")
    def jira_search_issues(self, jql: str, max_results: int = 10) -> dict[str, Any]:
        """Search Jira issues with a JQL query; returns key, summary, status, assignee and url.

        Examples: 'project = TASK AND status = "In Progress" ORDER BY updated DESC',
        'text ~ "login error" ORDER BY created DESC'.

        Args:
            jql: the JQL query.
            max_results: how many issues to return, 1 to 20 (default 10).
        """
        if not jql.strip():
            raise ToolError("The JQL query is empty. Give a query such as 'project = TASK'.")
        limit = max(1, min(max_results, MAX_SEARCH_RESULTS))
        with deadline(self.time_limit):
            data = self.search(jql, limit, _SEARCH_FIELDS)
        issues = [self._found(item) for item in (data.get("issues") or [])[:limit]]
        if "total" in data:
            more = int(data.get("total") or 0) > len(issues)
        else:
            more = bool(data.get("nextPageToken")) or data.get("isLast") is False
        return {"issues": issues, "count": len(issues), "more": more}

    @tool(
        writes=True,
        progress="Creating a Jira ticket: {summary}",
        lookup="find_created_issue",
        defaults={"project_key": "jira_project"},  # the channel's project, when it has one
    )
    def jira_create_issue(
        self,
        summary: str,
        description: str,
        project_key: str | None = None,
        issue_type: str = "Task",
        priority: str | None = None,
        labels: list[str] | None = None,
        *,
        marker: str | None = None,
    ) -> dict[str, Any]:
        """Create a Jira issue and return its key and url. Only in the allowed projects.

        Only call this when the user asked for a ticket. For a ticket about a CRM contact,
        name the contact and their account (company) in the summary or description.

        Args:
            summary: one line, at most 255 characters.
            description: the details, in plain text.
            project_key: the project, e.g. "TASK"; the configured default project when omitted.
            issue_type: "Task" (default), "Bug", "Story", ...
            priority: e.g. "High", "Medium", "Low"; Jira's default when omitted.
            labels: labels without spaces.
        """
        project = self._allowed_project(project_key)
        marker = marker or f"bot-{secrets.token_hex(5)}"
        fields = issue_fields(
            project, summary, description, issue_type, priority, labels or [], marker
        )
        with deadline(self.time_limit) as until:
            client = self.client()
            try:
                issue = self.call(
                    lambda: client.create_issue(fields=fields, prefetch=False),
                    action=f"create an issue in {project}",
                    write=True,
                )
            except OutcomeUnknown as unknown:
                return recover_create(self, project, marker, unknown.reason, until)
        key = (issue.raw or {}).get("key") or issue.key
        log.info("jira: created %s", key)
        return {"key": key, "url": self.issue_url(key)}

    def find_created_issue(
        self, marker: str, project_key: str | None = None, **_: Any
    ) -> dict[str, Any]:
        """The lookup of ``jira_create_issue`` for a turn resumed after a crash: the issue a
        create with ``marker`` made, found by its label; never creates one."""
        project = self._allowed_project(project_key)
        with deadline(self.time_limit) as until:
            return recover_create(self, project, marker, "the bot restarted", until)

    def _found(self, item: dict[str, Any]) -> dict[str, Any]:
        fields = item.get("fields") or {}
        return {
            "key": item.get("key"),
            "summary": trim(fields.get("summary"), SUMMARY_LIMIT),
            "status": _name(fields.get("status")),
            "assignee": _person(fields.get("assignee")),
            "url": self.issue_url(item.get("key") or ""),
        }

    def _allowed_project(self, project_key: str | None) -> str:
        allowed = self.settings.allowed_projects
        if not allowed:
            raise ToolError(
                "Creating Jira issues is disabled: no project is allowed. An admin can set "
                "JIRA_PROJECT or JIRA_ALLOWED_PROJECTS."
            )
        project = (project_key or self.settings.JIRA_PROJECT or "").strip().upper()
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


def jira_tools(settings: JiraSettings, time_limit: float) -> JiraTools | None:
    """The Jira tools, each call bounded by ``time_limit`` (TOOL_TIMEOUT_S), or None when
    JIRA_URL is unset (then they are not offered)."""
    if not settings.JIRA_URL:
        return None
    return JiraTools(settings, time_limit)


def _issue_key(value: str) -> str:
    key = value.strip().upper()
    if not ISSUE_KEY.match(key):
        raise ToolError(f"'{value[:40]}' is not a Jira issue key; keys look like TASK-123.")
    return key


def _text(value: Any) -> str | None:
    """A description: text in REST API v2 (v3's document format is not used here)."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _name(value: Any) -> str | None:
    if isinstance(value, dict):
        return trim(value.get("name"), NAME_LIMIT)
    return None


def _person(value: Any) -> str | None:
    if isinstance(value, dict):
        return trim(value.get("displayName") or value.get("name"), NAME_LIMIT)
    return None
