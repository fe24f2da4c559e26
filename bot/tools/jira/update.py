"""Changing an issue's fields: ``jira_update_issue`` (summary, description, priority,
labels, due date; only those given change).

The description is Markdown, sent as ADF on Cloud (API v3), wiki markup on Server (v2).
New labels replace the old ones but the bot's own ``bot-...`` markers, which stay (a
created issue is found by its marker). Whether an update was made is read back: every
field given holds what was sent.
"""

from __future__ import annotations

import datetime
from typing import Any

from bot.errors import ToolError
from bot.tools.jira.create import CREATE_DESCRIPTION_MAX, JIRA_SUMMARY_MAX
from bot.tools.jira.errors import NotFound, OutcomeUnknown, trim
from bot.tools.jira.issues import name_of, not_found, same
from bot.tools.jira.markup import plain_text
from bot.tools.jira.write import NOT_DONE, RESTARTED, JiraWrite
from bot.tools.tool import tool

#: the tool's arguments by Jira's field ids, and how a person calls each
FIELD_IDS = {
    "summary": "summary",
    "description": "description",
    "priority": "priority",
    "labels": "labels",
    "due_date": "duedate",
}
SHOWN_CHARS = 60


class JiraUpdates(JiraWrite):
    """``jira_update_issue``."""

    @tool(
        writes=True,
        progress="Updating {issue_key} in Jira",
        lookup="find_update",
        preview="describe_update",
    )
    async def jira_update_issue(
        self,
        issue_key: str,
        summary: str | None = None,
        description: str | None = None,
        priority: str | None = None,
        labels: list[str] | None = None,
        due_date: str | None = None,
        *,
        marker: str | None = None,
    ) -> dict[str, Any]:
        """Change fields of a Jira issue; only the fields given change.

        Args:
            issue_key: the issue, e.g. "TASK-123".
            summary: a new one-line summary, at most 255 characters.
            description: a new description, in Markdown (it replaces the old one).
            priority: e.g. "High", "Medium", "Low".
            labels: the labels the issue should have (they replace its labels), no spaces.
            due_date: the due date, YYYY-MM-DD.
        """
        key = self.writable(issue_key)
        wanted = changes(summary, description, priority, labels, due_date)
        return await self.jira.blocking(lambda: self._update(key, wanted))

    def _update(self, key: str, wanted: dict[str, Any]) -> dict[str, Any]:
        api, fields = self._fields(key, wanted)
        try:
            self.jira.call(
                lambda: self.jira.rest("PUT", f"issue/{key}", api=api, body={"fields": fields}),
                action=f"update {key}",
                write=True,
                bad_request="update",
                not_done="Nothing was changed.",
            )
        except NotFound:
            raise not_found(key) from None
        except OutcomeUnknown as unknown:
            return self._found(key, wanted, unknown.reason)
        return {"key": key, "changed": list(wanted), "url": self.jira.issue_url(key)}

    def _fields(self, key: str, wanted: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(API version, the ``fields`` of the edit)."""
        api = 3 if self.jira.cloud else 2
        fields: dict[str, Any] = {}
        for argument, value in wanted.items():
            if argument == "description":
                api, fields["description"] = self.rich_text(value)
            elif argument == "priority":
                fields["priority"] = {"name": value}
            elif argument == "labels":
                kept = [x for x in self.fields(key, "labels").get("labels") or [] if _ours(x)]
                fields["labels"] = list(dict.fromkeys([*value, *kept]))
            else:
                fields[FIELD_IDS[argument]] = value
        return api, fields

    def _found(self, key: str, wanted: dict[str, Any], why: str) -> dict[str, Any]:
        api = 3 if self.jira.cloud and "description" in wanted else 2
        now = self.fields(key, ",".join(FIELD_IDS[a] for a in wanted), api=api)
        differ = [a for a, value in wanted.items() if not self._holds(now, a, value)]
        if differ:
            what = f"Updating {key} failed"
            raise ToolError(
                NOT_DONE.format(what=what, why=why, key=key) + f" ({', '.join(differ)} differ.)"
            )
        return {
            "key": key,
            "changed": list(wanted),
            "url": self.jira.issue_url(key),
            "note": f"Found after a failure ({why}): {key} holds the new values. It was not "
            "sent again.",
        }

    def _holds(self, now: dict[str, Any], argument: str, value: Any) -> bool:
        held = now.get(FIELD_IDS[argument])
        if argument == "description":
            sent = self.rich_text(value)[1]
            return _words(plain_text(held)) == _words(plain_text(sent))
        if argument == "priority":
            return same(name_of(held), value)
        if argument == "labels":
            return {x for x in held or [] if not _ours(x)} == set(value)
        return same(str(held or ""), value)

    async def find_update(self, marker: str, issue_key: str, **arguments: Any) -> dict[str, Any]:
        """The lookup of ``jira_update_issue``: the fields given, read back."""
        key = self.writable(issue_key)
        wanted = changes(**{a: arguments.get(a) for a in FIELD_IDS})
        return await self.jira.blocking(lambda: self._found(key, wanted, RESTARTED))

    async def describe_update(self, issue_key: str, **arguments: Any) -> str:
        """The card's heading: each field given, from what it is to what it would be."""
        key = self.writable(issue_key)
        wanted = changes(**{a: arguments.get(a) for a in FIELD_IDS})
        names = ",".join(FIELD_IDS[a] for a in wanted if a != "description")
        now = await self.jira.blocking(lambda: self.fields(key, names)) if names else {}
        parts = []
        for argument, value in wanted.items():
            held = now.get(FIELD_IDS[argument])
            if argument == "description":
                parts.append("description replaced")
            elif argument == "priority":
                parts.append(f"priority {name_of(held) or 'none'} → {value}")
            elif argument == "labels":
                old = ", ".join(x for x in held or [] if not _ours(x)) or "none"
                parts.append(f"labels {old} → {', '.join(value) or 'none'}")
            elif argument == "due_date":
                parts.append(f"due date {held or 'none'} → {value}")
            else:
                parts.append(f"summary {_short(held) or 'none'} → {_short(value)}")
        return f"Update {key}: " + "; ".join(parts)


def changes(
    summary: str | None = None,
    description: str | None = None,
    priority: str | None = None,
    labels: list[str] | None = None,
    due_date: str | None = None,
) -> dict[str, Any]:
    """The fields to change, checked; ToolError for none, or for what Jira would refuse."""
    wanted: dict[str, Any] = {}
    if summary is not None:
        line = " ".join(summary.split())
        if not line or len(line) > JIRA_SUMMARY_MAX:
            raise ToolError(f"A summary is one line of 1 to {JIRA_SUMMARY_MAX} characters.")
        wanted["summary"] = line
    if description is not None:
        if len(description) > CREATE_DESCRIPTION_MAX:
            raise ToolError(f"Keep the description under {CREATE_DESCRIPTION_MAX} characters.")
        wanted["description"] = description
    if priority is not None and priority.strip():
        wanted["priority"] = priority.strip()
    if labels is not None:
        wanted["labels"] = list(dict.fromkeys("-".join(x.split())[:255] for x in labels if x))
    if due_date is not None:
        try:
            wanted["due_date"] = datetime.date.fromisoformat(due_date.strip()).isoformat()
        except ValueError:
            raise ToolError(f"'{due_date[:30]}' is not a date; give it as YYYY-MM-DD.") from None
    if not wanted:
        raise ToolError("Say what to change: summary, description, priority, labels or due_date.")
    return wanted


def _ours(label: str) -> bool:
    """A marker the bot put on an issue it created."""
    return label.startswith("bot-")


def _words(text: str) -> str:
    return " ".join(text.split())


def _short(value: Any) -> str:
    text = " ".join(str(value or "").split())
    return f"“{trim(text, SHOWN_CHARS)}”" if text else ""
