"""Moving a Jira issue to another status through its workflow: ``jira_transition_issue``.

The issue's transitions are read first (with the fields each one's screen asks for): a
status it cannot move to is an error listing those it can, a transition whose screen
requires a field the bot cannot fill is an error naming it; nothing changes either way. A
comment given goes on the issue after the move, like ``jira_add_comment``'s (the same
marker). Whether a move was made is read back from the issue's status.
"""

from __future__ import annotations

import secrets
from typing import Any

from bot.errors import ToolError
from bot.people import Person
from bot.tools.jira.comment import JiraComments, checked_body
from bot.tools.jira.errors import NotFound, OutcomeUnknown
from bot.tools.jira.issues import name_of, not_found, same
from bot.tools.jira.users import credit
from bot.tools.jira.write import NOT_DONE, RESTARTED, JiraWrite
from bot.tools.tool import tool

#: what a transition's screen may ask that the bot fills (the comment, after the move)
FILLED = frozenset({"comment"})


class JiraTransitions(JiraWrite):
    """``jira_transition_issue``."""

    @tool(
        writes=True,
        progress="Moving {issue_key} to {status} in Jira",
        lookup="find_transition",
        preview="describe_transition",
    )
    async def jira_transition_issue(
        self, issue_key: str, status: str, comment: str | None = None, *, marker: str | None = None
    ) -> dict[str, Any]:
        """Move a Jira issue to another status of its workflow, with a comment if given.

        Args:
            issue_key: the issue, e.g. "TASK-123".
            status: the status to move it to, by name, e.g. "In Progress" or "Done".
            comment: a comment to add as it moves, in Markdown.
        """
        key = self.writable(issue_key)
        text = checked_body(comment) if comment and comment.strip() else None
        asker = await self.users.asker() if text else None
        marker = marker or f"bot-{secrets.token_hex(5)}"
        return await self.jira.blocking(lambda: self._move(key, status, text, asker, marker))

    def _choose(self, key: str, status: str) -> tuple[str, dict[str, Any] | None]:
        """(the issue's status now, the transition to ``status``: None when it is there)."""
        now = name_of(self.fields(key, "status").get("status")) or "?"
        if same(now, status):
            return now, None
        transitions = self.jira.call(
            lambda: self.jira.rest(
                "GET", f"issue/{key}/transitions", params={"expand": "transitions.fields"}
            ),
            action=f"read the transitions of {key}",
            bad_request="request",
        )
        offered = [t for t in (transitions or {}).get("transitions") or [] if isinstance(t, dict)]
        chosen = next((t for t in offered if same(name_of(t.get("to")), status)), None)
        chosen = chosen or next((t for t in offered if same(t.get("name"), status)), None)
        if chosen is None:
            targets = sorted({name_of(t.get("to")) or "?" for t in offered})
            can = f"It can move to: {', '.join(targets)}." if targets else "It can move nowhere."
            raise ToolError(
                f"{key} is {now} and cannot move to '{status[:60]}'. {can} Nothing was changed."
            )
        needed = [
            str(field.get("name") or field_id)
            for field_id, field in (chosen.get("fields") or {}).items()
            if isinstance(field, dict)
            and field.get("required")
            and not field.get("hasDefaultValue")
            and field_id not in FILLED
        ]
        if needed:
            to = name_of(chosen.get("to")) or status
            raise ToolError(
                f"Moving {key} to {to} needs {', '.join(needed)}, which the bot cannot fill. "
                f"Move it in Jira: {self.jira.issue_url(key)}. Nothing was changed."
            )
        return now, chosen

    def _move(
        self, key: str, status: str, comment: str | None, asker: Person | None, marker: str
    ) -> dict[str, Any]:
        now, chosen = self._choose(key, status)
        if chosen is None:
            dropped = " The comment was not added." if comment else ""
            return {"key": key, "status": now, "note": f"{key} is {now} already.{dropped}"}
        to = name_of(chosen.get("to")) or status
        try:
            self.jira.call(
                lambda: self.jira.rest(
                    "POST", f"issue/{key}/transitions", body={"transition": {"id": chosen["id"]}}
                ),
                action=f"move {key} to {to}",
                write=True,
                bad_request="transition",
                not_done="It was not moved.",
            )
        except NotFound:
            raise not_found(key) from None
        except OutcomeUnknown as unknown:
            return self._found(key, to, comment is not None, marker, unknown.reason)
        result = {"key": key, "status": to, "from": now, "url": self.jira.issue_url(key)}
        if comment is not None:
            comments = JiraComments(self.jira, self.users)
            try:
                made = comments.add(key, f"{credit(asker)}\n\n{comment}", marker)
                result["comment_id"] = made["comment_id"]
            except ToolError as exc:  # the move stands: say what became of the comment
                result["comment_error"] = str(exc)
        return result

    def _found(
        self, key: str, status: str, commented: bool, marker: str, why: str
    ) -> dict[str, Any]:
        now = name_of(self.fields(key, "status").get("status")) or "?"
        if not same(now, status):
            what = f"Moving {key} to {status} failed"
            raise ToolError(NOT_DONE.format(what=what, why=why, key=key) + f" (It is {now}.)")
        result = {
            "key": key,
            "status": now,
            "url": self.jira.issue_url(key),
            "note": f"Found after a failure ({why}): {key} is {now}. It was not sent again.",
        }
        if commented:
            comment = JiraComments(self.jira, self.users).with_marker(key, marker)
            if comment is not None:
                result["comment_id"] = str(comment.get("id") or "")
            else:
                result["comment_error"] = "The comment is not on the issue; it was not added."
        return result

    async def find_transition(
        self, marker: str, issue_key: str, status: str, comment: str | None = None, **_: Any
    ) -> dict[str, Any]:
        """The lookup of ``jira_transition_issue``: the issue's status (and the comment by
        its marker), read back."""
        key = self.writable(issue_key)
        commented = bool(comment and comment.strip())
        return await self.jira.blocking(
            lambda: self._found(key, status, commented, marker, RESTARTED)
        )

    async def describe_transition(
        self, issue_key: str, status: str, comment: str | None = None, **_: Any
    ) -> str:
        """The card's heading: "Move TASK-12 from In Progress to Done"."""
        key = self.writable(issue_key)
        with_comment = " with a comment" if comment and comment.strip() else ""
        try:
            now, chosen = await self.jira.blocking(lambda: self._choose(key, status))
        except ToolError as exc:
            return f"Move {key} to {status.strip()[:60]}: {exc}"
        if chosen is None:
            return f"Move {key} to {now} (it is there already: nothing to do)"
        to = name_of(chosen.get("to")) or status
        return f"Move {key} from {now} to {to}{with_comment}"
