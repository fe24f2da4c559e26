"""A comment on a Jira issue, in the name of who asked: ``jira_add_comment``.

The comment starts "From Slack, for <name>:" (the bot posts with its own account) and is
sent as ADF on Cloud (API v3), wiki markup on Server (API v2). It carries the call's marker
as a comment property (``bot.marker``), by which a lost answer or a restart finds it: the
newest comments are read with their properties, and one that carries the marker is the
result; none, and the comment was not added (and is not sent again).
"""

from __future__ import annotations

import secrets
from typing import Any

from bot.errors import ToolError
from bot.tools.jira.errors import NotFound, OutcomeUnknown
from bot.tools.jira.issues import not_found
from bot.tools.jira.users import credit
from bot.tools.jira.write import NOT_DONE, RESTARTED, JiraWrite
from bot.tools.tool import tool

#: the comment property that carries a comment's marker
PROPERTY = "bot.marker"
#: a longer comment is refused rather than sent (Jira's limit is 32,767 characters)
COMMENT_MAX = 30_000
#: the newest comments searched for a marker
LOOK_BACK = 50
#: how much of a comment the approval card's heading quotes
PREVIEW_CHARS = 160


def checked_body(body: str) -> str:
    text = body.strip()
    if not text:
        raise ToolError("The comment is empty; say what it should say.")
    if len(text) > COMMENT_MAX:
        raise ToolError(f"The comment has {len(text)} characters; keep it under {COMMENT_MAX}.")
    return text


def quoted(text: str) -> str:
    """The first words of ``text`` on one line, for a card's heading."""
    line = " ".join(text.split())
    return f"“{line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + '…'}”"


class JiraComments(JiraWrite):
    """``jira_add_comment``; ``add`` and ``with_marker`` also serve a transition's comment."""

    @tool(
        writes=True,
        progress="Commenting on {issue_key} in Jira",
        lookup="find_comment",
        preview="describe_comment",
    )
    async def jira_add_comment(
        self, issue_key: str, body: str, *, marker: str | None = None
    ) -> dict[str, Any]:
        """Add a comment to a Jira issue, for the person who asked; returns its url.

        Only when the user asked for a comment. Jira shows it as the bot's, starting
        "From Slack, for <their name>:".

        Args:
            issue_key: the issue, e.g. "TASK-123".
            body: the comment, in Markdown.
        """
        key = self.writable(issue_key)
        text = checked_body(body)
        asker = await self.users.asker()
        marker = marker or f"bot-{secrets.token_hex(5)}"
        said = f"{credit(asker)}\n\n{text}"
        return await self.jira.blocking(lambda: self.add(key, said, marker))

    def add(self, key: str, markdown: str, marker: str) -> dict[str, Any]:
        """Post ``markdown`` as a comment on ``key`` carrying ``marker``. Blocking."""
        api, body = self.rich_text(markdown)
        payload = {"body": body, "properties": [{"key": PROPERTY, "value": {"marker": marker}}]}
        try:
            made = self.jira.call(
                lambda: self.jira.rest("POST", f"issue/{key}/comment", api=api, body=payload),
                action=f"comment on {key}",
                write=True,
                bad_request="comment",
                not_done="The comment was not added.",
            )
        except NotFound:
            raise not_found(key) from None
        except OutcomeUnknown as unknown:
            return self.found(key, marker, unknown.reason)
        return self.result(key, str((made or {}).get("id") or ""))

    def found(self, key: str, marker: str, why: str) -> dict[str, Any]:
        """The comment on ``key`` that carries ``marker``, or ToolError saying there is none."""
        comment = self.with_marker(key, marker)
        if comment is None:
            raise ToolError(NOT_DONE.format(what="Adding the comment failed", why=why, key=key))
        return {
            **self.result(key, str(comment.get("id") or "")),
            "note": f"Found after a failure ({why}): {key} has the comment. It was not sent again.",
        }

    def with_marker(self, key: str, marker: str) -> dict[str, Any] | None:
        """The newest comment on ``key`` that carries ``marker``, if any. Blocking."""
        try:
            page = self.jira.call(
                lambda: self.jira.rest(
                    "GET",
                    f"issue/{key}/comment",
                    params={"expand": "properties", "orderBy": "-created", "maxResults": LOOK_BACK},
                ),
                action=f"read the comments of {key}",
                bad_request="request",
            )
        except NotFound:
            raise not_found(key) from None
        for comment in (page or {}).get("comments") or []:
            for held in comment.get("properties") or []:
                value = held.get("value")
                if held.get("key") == PROPERTY and isinstance(value, dict):
                    if value.get("marker") == marker:
                        return dict(comment)
        return None

    def result(self, key: str, comment_id: str) -> dict[str, Any]:
        url = self.jira.issue_url(key)
        if comment_id:
            url += f"?focusedCommentId={comment_id}"
        return {"key": key, "comment_id": comment_id, "url": url}

    async def find_comment(self, marker: str, issue_key: str, **_: Any) -> dict[str, Any]:
        """The lookup of ``jira_add_comment``: the comment its marker names, never a new one."""
        key = self.writable(issue_key)
        return await self.jira.blocking(lambda: self.found(key, marker, RESTARTED))

    def describe_comment(self, issue_key: str, body: str, **_: Any) -> str:
        """The card's heading: the issue and the comment's first words."""
        return f"Comment on {self.writable(issue_key)}: {quoted(body)}"
