"""The Jira tools of reading and creating: read an issue (its newest comments with it),
search with JQL, create an issue in an allowed project, for the person who asked.

The other writes are a class each (comment.py, assign.py, transition.py, update.py,
link.py), sharing this connection.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from bot.config import JiraSettings
from bot.errors import ToolError
from bot.people import People, Person
from bot.tools.jira.client import JiraConnection, deadline
from bot.tools.jira.create import create_issue, issue_fields, recover_create
from bot.tools.jira.errors import NotFound, trim
from bot.tools.jira.issues import allowed_project, name_of, not_found, parse_key, person_of
from bot.tools.jira.markup import to_wiki
from bot.tools.jira.users import JiraUser, JiraUsers
from bot.tools.tool import tool

log = logging.getLogger(__name__)

DESCRIPTION_LIMIT = 2_000
SUMMARY_LIMIT = 300
MAX_SEARCH_RESULTS = 20
#: the newest comments an issue is read with, and how much of each
COMMENTS_SHOWN = 5
COMMENT_LIMIT = 500
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
    "comment",
]
_SEARCH_FIELDS = ["summary", "status", "assignee"]


class JiraTools(JiraConnection):
    """The Jira tools; register with ``ToolRegistry.add_object(JiraTools(jira, time_limit))``.
    The connection (client.py) is created on first use. ``people``: the port that names
    who asked (none: people are known by their id)."""

    def __init__(
        self,
        settings: JiraSettings,
        time_limit: float,
        *,
        timeout: float | None = None,
        people: People | None = None,
    ) -> None:
        super().__init__(settings, time_limit, timeout=timeout)
        self.users = JiraUsers(self, people)
        #: projects where Jira refused the bot's setting of a reporter
        self._no_reporter: set[str] = set()

    @tool(progress="Looking up {issue_key} in Jira")
    def jira_get_issue(self, issue_key: str) -> dict[str, Any]:
        """Read one Jira issue: summary, status, type, priority, people, dates, description,
        and its newest comments.

        Use it whenever the user mentions an issue key; never describe an issue you have not
        read. Descriptions longer than 2,000 characters are cut; at most 5 comments, the
        newest, are shown, each cut at 500.

        Args:
            issue_key: the issue key, e.g. "TASK-123".
        """
        key = parse_key(issue_key)
        with deadline(self.time_limit):
            client = self.client()
            try:
                issue = self.call(
                    lambda: client.issue(key, fields=",".join(_ISSUE_FIELDS)),
                    action=f"read {key}",
                    bad_request="request",
                )
            except NotFound:
                raise not_found(key) from None
        raw = issue.raw or {}
        fields = raw.get("fields") or {}
        real_key = raw.get("key") or key
        found = {
            "key": real_key,
            "summary": trim(fields.get("summary"), SUMMARY_LIMIT),
            "status": name_of(fields.get("status")),
            "issue_type": name_of(fields.get("issuetype")),
            "priority": name_of(fields.get("priority")),
            "assignee": person_of(fields.get("assignee")),
            "reporter": person_of(fields.get("reporter")),
            "created": fields.get("created"),
            "updated": fields.get("updated"),
            "description": trim(_text(fields.get("description")), DESCRIPTION_LIMIT),
            "url": self.issue_url(real_key),
        }
        return {**found, **_comments(fields.get("comment"))}

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
        preview="describe_create",
        defaults={"project_key": "jira_project"},  # the channel's project, when it has one
    )
    async def jira_create_issue(
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
        name the contact and their account (company) in the summary or description. The
        person who asked is its reporter when Jira knows them (else the description says
        who asked).

        Args:
            summary: one line, at most 255 characters.
            description: the details, in Markdown.
            project_key: the project, e.g. "TASK"; the configured default project when omitted.
            issue_type: "Task" (default), "Bug", "Story", ...
            priority: e.g. "High", "Medium", "Low"; Jira's default when omitted.
            labels: labels without spaces.
        """
        project = allowed_project(self.settings, project_key)
        marker = marker or f"bot-{secrets.token_hex(5)}"
        fields = issue_fields(
            project, summary, description, issue_type, priority, labels or [], marker
        )
        asker = await self.users.asker()
        reporter = None
        if asker is not None and project not in self._no_reporter:
            try:
                reporter = await self.users.of_person(asker)
            except ToolError as exc:  # the description names them instead
                log.info("jira: no reporter for the create (%s)", exc)
        return await self.blocking(lambda: self._create(project, fields, asker, reporter, marker))

    def _create(
        self,
        project: str,
        fields: dict[str, Any],
        asker: Person | None,
        reporter: JiraUser | None,
        marker: str,
    ) -> dict[str, Any]:
        """The create, as the asker's (their reporter, else the description says who
        asked). Jira refusing the reporter is remembered for the project."""
        description = to_wiki(fields["description"])
        named = {**fields, "description": description}
        if asker is not None:
            named["description"] = f"Asked in Slack by {asker.called}.\n\n{description}"
        attempts = [named]
        if reporter is not None:
            reporting = {"reporter": reporter.reference(self.cloud)}
            attempts.insert(0, {**fields, "description": description, **reporting})
        result = create_issue(self, project, attempts, marker)
        if result.pop("reporter_refused", False):
            self._no_reporter.add(project)
        return result

    def describe_create(
        self,
        summary: str,
        project_key: str | None = None,
        issue_type: str = "Task",
        **_: Any,
    ) -> str:
        """The card's heading: "Create a Task in TASK: “summary”"."""
        project = allowed_project(self.settings, project_key)
        kind = " ".join(issue_type.split()) or "Task"
        return f"Create a {kind} in {project}: “{' '.join(summary.split())[:200]}”"

    def find_created_issue(
        self, marker: str, project_key: str | None = None, **_: Any
    ) -> dict[str, Any]:
        """The lookup of ``jira_create_issue`` for a turn resumed after a crash: the issue a
        create with ``marker`` made, found by its label; never creates one."""
        project = allowed_project(self.settings, project_key)
        with deadline(self.time_limit) as until:
            return recover_create(self, project, marker, "the bot restarted", until)

    def _found(self, item: dict[str, Any]) -> dict[str, Any]:
        fields = item.get("fields") or {}
        return {
            "key": item.get("key"),
            "summary": trim(fields.get("summary"), SUMMARY_LIMIT),
            "status": name_of(fields.get("status")),
            "assignee": person_of(fields.get("assignee")),
            "url": self.issue_url(item.get("key") or ""),
        }


def jira_tools(
    settings: JiraSettings, time_limit: float, *, people: People | None = None
) -> JiraTools | None:
    """The Jira tools, each call bounded by ``time_limit`` (TOOL_TIMEOUT_S), or None when
    JIRA_URL is unset (then they are not offered)."""
    if not settings.JIRA_URL:
        return None
    return JiraTools(settings, time_limit, people=people)


def _comments(value: Any) -> dict[str, Any]:
    """The newest comments of an issue's ``comment`` field (none: nothing is added)."""
    comments = [c for c in (value or {}).get("comments") or [] if isinstance(c, dict)]
    if not comments:
        return {}
    total = max(int((value or {}).get("total") or 0), len(comments))
    shown = [
        {
            "author": person_of(c.get("author")),
            "created": c.get("created"),
            "body": trim(_text(c.get("body")), COMMENT_LIMIT),
        }
        for c in comments[-COMMENTS_SHOWN:]
    ]
    return {"comments": shown, "comments_total": total}


def _text(value: Any) -> str | None:
    """A description: text in REST API v2 (v3's document format is not used here)."""
    return value if value is None or isinstance(value, str) else json.dumps(value)
