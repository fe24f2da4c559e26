"""What the Jira writes share: one kind of write is a class of its own (comment.py,
assign.py, transition.py, update.py, link.py), each with its tool, the ``preview`` that says
the change in words for the approval card, and the ``lookup`` that finds out, for a turn
taken over after a crash, whether the write was done (never doing it).

A write whose answer is lost (the connection broke, Jira did not answer in time, a 5xx) is
looked up the same way at once: it is never sent twice.
"""

from __future__ import annotations

from typing import Any

from bot.config import JiraSettings
from bot.tools.jira.client import JiraConnection
from bot.tools.jira.errors import NotFound
from bot.tools.jira.issues import not_found, writable_issue
from bot.tools.jira.markup import to_adf, to_wiki
from bot.tools.jira.users import JiraUsers

#: a write whose outcome is unknown, or that a restart cut short, and that Jira shows undone
NOT_DONE = (
    "{what} ({why}), and {key} shows it was not done. It was not sent again: ask the person "
    "whether to try again."
)
RESTARTED = "the bot restarted while it was being sent"


class JiraWrite:
    """The connection, people and checks one kind of Jira write uses."""

    def __init__(self, jira: JiraConnection, users: JiraUsers) -> None:
        self.jira = jira
        self.users = users

    @property
    def settings(self) -> JiraSettings:
        return self.jira.settings

    def writable(self, value: str) -> str:
        """The key of an issue in an allowed project; ToolError otherwise."""
        return writable_issue(self.settings, value)

    def fields(self, key: str, names: str, *, api: int = 2) -> dict[str, Any]:
        """The issue's ``names`` fields (comma-separated), read now. Blocking."""
        try:
            issue = self.jira.call(
                lambda: self.jira.rest("GET", f"issue/{key}", api=api, params={"fields": names}),
                action=f"read {key}",
                bad_request="request",
            )
        except NotFound:
            raise not_found(key) from None
        return dict((issue or {}).get("fields") or {})

    def rich_text(self, markdown: str) -> tuple[int, Any]:
        """(REST API version, body) of Markdown text as Jira takes it: ADF on Cloud (v3),
        wiki markup on Server / Data Center (v2)."""
        return (3, to_adf(markdown)) if self.jira.cloud else (2, to_wiki(markdown))
