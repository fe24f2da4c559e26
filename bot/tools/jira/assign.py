"""Assigning a Jira issue: ``jira_assign_issue``.

The assignee is a Slack mention (matched to the Jira user with the email Slack gives), an
email, or a name among the issue's assignable users; none or several found is an error
that lists the candidates, and nothing changes. Whether an assignment was made (its
answer lost, or the bot restarted) is read back from the issue's assignee.
"""

from __future__ import annotations

from typing import Any

from bot.errors import ToolError
from bot.tools.jira.errors import NotFound, OutcomeUnknown
from bot.tools.jira.issues import not_found, person_of
from bot.tools.jira.users import JiraUser
from bot.tools.jira.write import NOT_DONE, RESTARTED, JiraWrite
from bot.tools.tool import tool


class JiraAssign(JiraWrite):
    """``jira_assign_issue``."""

    @tool(
        writes=True,
        progress="Assigning {issue_key} to {assignee} in Jira",
        lookup="find_assignment",
        preview="describe_assignment",
    )
    async def jira_assign_issue(
        self, issue_key: str, assignee: str, *, marker: str | None = None
    ) -> dict[str, Any]:
        """Assign a Jira issue to someone; returns who it is assigned to now.

        Args:
            issue_key: the issue, e.g. "TASK-123".
            assignee: who: a Slack mention exactly as written in the conversation
                (<@U123ABC>), an email, or their name in Jira.
        """
        key = self.writable(issue_key)
        user = await self.users.assignee(key, assignee)
        return await self.jira.blocking(lambda: self._assign(key, user))

    def _assign(self, key: str, user: JiraUser) -> dict[str, Any]:
        try:
            self.jira.call(
                lambda: self.jira.rest(
                    "PUT", f"issue/{key}/assignee", body=user.reference(self.jira.cloud)
                ),
                action=f"assign {key} to {user.name}",
                write=True,
                bad_request="assignment",
                not_done="It was not assigned.",
            )
        except NotFound:
            raise not_found(key) from None
        except OutcomeUnknown as unknown:
            return self._found(key, user, unknown.reason)
        return {"key": key, "assignee": user.name, "url": self.jira.issue_url(key)}

    def _found(self, key: str, user: JiraUser, why: str) -> dict[str, Any]:
        now = self.fields(key, "assignee").get("assignee") or {}
        if (now.get("accountId") or now.get("name")) != user.id:
            what = f"Assigning {key} to {user.name} failed"
            held = person_of(now) or "nobody"
            raise ToolError(NOT_DONE.format(what=what, why=why, key=key) + f" ({held} has it.)")
        return {
            "key": key,
            "assignee": user.name,
            "url": self.jira.issue_url(key),
            "note": f"Found after a failure ({why}): {key} is assigned to {user.name}. It was "
            "not sent again.",
        }

    async def find_assignment(
        self, marker: str, issue_key: str, assignee: str, **_: Any
    ) -> dict[str, Any]:
        """The lookup of ``jira_assign_issue``: the issue's assignee, read back."""
        key = self.writable(issue_key)
        user = await self.users.assignee(key, assignee)
        return await self.jira.blocking(lambda: self._found(key, user, RESTARTED))

    async def describe_assignment(self, issue_key: str, assignee: str, **_: Any) -> str:
        """The card's heading: "Assign TASK-12 to Carol Diaz", or why nobody would be."""
        key = self.writable(issue_key)
        try:
            user = await self.users.assignee(key, assignee)
        except ToolError as exc:
            return f"Assign {key} to {assignee.strip()[:60]}: {exc}"
        return f"Assign {key} to {user.name}"
