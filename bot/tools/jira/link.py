"""Linking two issues: ``jira_link_issues`` (TASK-1 "blocks" TASK-2).

The link type is one of the instance's (``issueLinkType``, read once and kept a while),
named by its outward words ("blocks"), its inward ones ("is blocked by") or its name; an
unknown one is an error listing them. Both issues must be in allowed projects. Whether a
link was made is read back from the first issue's links.

In Jira's request the ``inwardIssue`` is the one the outward words are said of: "A blocks
B" is ``inwardIssue`` A, ``outwardIssue`` B; read from A, the link shows B as its
``outwardIssue``.
"""

from __future__ import annotations

import threading
from typing import Any

from cachetools import TTLCache

from bot.errors import ToolError
from bot.tools.jira.client import JiraConnection
from bot.tools.jira.errors import NotFound, OutcomeUnknown
from bot.tools.jira.issues import same
from bot.tools.jira.users import JiraUsers
from bot.tools.jira.write import NOT_DONE, RESTARTED, JiraWrite
from bot.tools.tool import tool

#: how long the instance's link types are kept before they are read again
LINK_TYPES_FOR_S = 600.0


class JiraLinks(JiraWrite):
    """``jira_link_issues``."""

    def __init__(self, jira: JiraConnection, users: JiraUsers) -> None:
        super().__init__(jira, users)
        # speed device: see bench/README.md, "people and link types kept"
        self._types: TTLCache[str, list[dict[str, Any]]] = TTLCache(1, LINK_TYPES_FOR_S)
        self._lock = threading.Lock()

    @tool(
        writes=True,
        progress="Linking {issue_key} to {other_issue_key} in Jira",
        lookup="find_link",
        preview="describe_link",
    )
    async def jira_link_issues(
        self, issue_key: str, other_issue_key: str, link_type: str, *, marker: str | None = None
    ) -> dict[str, Any]:
        """Link two Jira issues: issue_key <link_type> other_issue_key.

        Args:
            issue_key: the issue the link is said of, e.g. "TASK-12".
            other_issue_key: the other issue, e.g. "TASK-3".
            link_type: how the first relates to the other, in this Jira's words, e.g.
                "blocks", "is blocked by", "relates to", "duplicates".
        """
        first, other = self._pair(issue_key, other_issue_key)
        return await self.jira.blocking(lambda: self._link(first, other, link_type))

    def _pair(self, issue_key: str, other_issue_key: str) -> tuple[str, str]:
        first, other = self.writable(issue_key), self.writable(other_issue_key)
        if first == other:
            raise ToolError("An issue cannot be linked to itself.")
        return first, other

    def types(self) -> list[dict[str, Any]]:
        """The instance's link types (kept LINK_TYPES_FOR_S). Blocking."""
        with self._lock:
            kept = self._types.get("types")
        if kept is not None:
            return kept
        found = self.jira.call(
            lambda: self.jira.rest("GET", "issueLinkType"),
            action="read the issue link types",
            bad_request="request",
        )
        types = [t for t in (found or {}).get("issueLinkTypes") or [] if isinstance(t, dict)]
        with self._lock:
            self._types["types"] = types
        return types

    def _kind(self, link_type: str) -> tuple[dict[str, Any], bool]:
        """(the link type, whether the first issue is its outward side)."""
        types = self.types()
        for kind in types:
            if same(kind.get("outward"), link_type) or same(kind.get("name"), link_type):
                return kind, True
        for kind in types:
            if same(kind.get("inward"), link_type):
                return kind, False
        listed = "; ".join(f"{t.get('outward')} / {t.get('inward')}" for t in types)
        raise ToolError(
            f"Jira has no link type '{link_type[:60]}'. Its link types: {listed}. Nothing was "
            "changed."
        )

    def _link(self, first: str, other: str, link_type: str) -> dict[str, Any]:
        kind, outward = self._kind(link_type)
        inward_issue, outward_issue = (first, other) if outward else (other, first)
        body = {
            "type": {"name": kind["name"]},
            "inwardIssue": {"key": inward_issue},
            "outwardIssue": {"key": outward_issue},
        }
        said = _said(first, other, kind, outward)
        try:
            self.jira.call(
                lambda: self.jira.rest("POST", "issueLink", body=body),
                action=f"link {first} and {other}",
                write=True,
                bad_request="link",
                not_done="They were not linked.",
            )
        except NotFound:
            raise ToolError(
                f"{first} or {other} does not exist, or you do not have permission to see it."
            ) from None
        except OutcomeUnknown as unknown:
            return self._found(first, other, link_type, unknown.reason)
        return {"link": said, "url": self.jira.issue_url(first)}

    def _found(self, first: str, other: str, link_type: str, why: str) -> dict[str, Any]:
        kind, outward = self._kind(link_type)
        said = _said(first, other, kind, outward)
        side = "outwardIssue" if outward else "inwardIssue"
        links = self.fields(first, "issuelinks").get("issuelinks") or []
        symmetric = same(kind.get("inward"), kind.get("outward"))
        found = any(
            same((link.get("type") or {}).get("name"), kind.get("name"))
            and any(
                (link.get(s) or {}).get("key") == other
                for s in (("outwardIssue", "inwardIssue") if symmetric else (side,))
            )
            for link in links
            if isinstance(link, dict)
        )
        if not found:
            raise ToolError(NOT_DONE.format(what=f"Linking ({said}) failed", why=why, key=first))
        return {
            "link": said,
            "url": self.jira.issue_url(first),
            "note": f"Found after a failure ({why}): {said}. It was not sent again.",
        }

    async def find_link(
        self, marker: str, issue_key: str, other_issue_key: str, link_type: str, **_: Any
    ) -> dict[str, Any]:
        """The lookup of ``jira_link_issues``: the first issue's links, read back."""
        first, other = self._pair(issue_key, other_issue_key)
        return await self.jira.blocking(lambda: self._found(first, other, link_type, RESTARTED))

    async def describe_link(
        self, issue_key: str, other_issue_key: str, link_type: str, **_: Any
    ) -> str:
        """The card's heading: "Link TASK-12 to TASK-3: TASK-12 blocks TASK-3"."""
        first, other = self._pair(issue_key, other_issue_key)
        try:
            kind, outward = await self.jira.blocking(lambda: self._kind(link_type))
        except ToolError as exc:
            return f"Link {first} to {other}: {exc}"
        return f"Link {first} to {other}: {_said(first, other, kind, outward)}"


def _said(first: str, other: str, kind: dict[str, Any], outward: bool) -> str:
    words = kind.get("outward" if outward else "inward") or kind.get("name") or "relates to"
    return f"{first} {words} {other}"
