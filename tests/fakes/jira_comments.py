"""The fake Jira's comments and links. A comment's body is a string on REST API v2 and an
ADF document on v3 (each refused on the other, as Jira does); it may carry entity
properties, shown when asked for with ``expand=properties``. Issue links are made between
two issues by a link type (``LINK_TYPES``): ``inwardIssue`` is the one the outward words
are said of ("A blocks B": inward A, outward B), as Jira's POST /issueLink takes it."""

from __future__ import annotations

import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.jira_adf import as_document, as_text, problem
from tests.fakes.jira_answers import NOT_FOUND, error, now

#: (id, name, inward, outward)
LINK_TYPES = (
    ("10000", "Blocks", "is blocked by", "blocks"),
    ("10001", "Cloners", "is cloned by", "clones"),
    ("10002", "Duplicate", "is duplicated by", "duplicates"),
    ("10003", "Relates", "relates to", "relates to"),
)


class CommentMethods:
    """Mixed into FakeJira: its issues, comments and links, under its lock."""

    issues: dict[str, dict[str, Any]]
    links: list[dict[str, str]]
    _lock: threading.Lock
    _next_id: int

    def comments_of(self, key: str) -> list[dict[str, Any]]:
        """The comments of ``key``, oldest first (a copy)."""
        with self._lock:
            return [dict(c) for c in self.issues[key.upper()].get("comments", [])]

    def _comment_json(self, comment: dict[str, Any], version: int, *, properties: bool) -> Any:
        body = as_document(comment["body"]) if version == 3 else as_text(comment["body"])
        shown = {k: v for k, v in comment.items() if k != "properties"}
        shown["body"] = body
        if properties:
            shown["properties"] = list(comment.get("properties", []))
        return shown

    def _add_comment(self, key: str, payload: Any, user: dict[str, Any], version: int) -> Response:
        if not isinstance(payload, dict):
            return error(400, ["Request body must be a JSON object."])
        body = payload.get("body")
        if version == 3:
            if problem(body):
                return error(400, [], {"comment": "Comment body is not valid!"})
        elif not isinstance(body, str):
            return error(
                400, ["Can not deserialize instance of java.lang.String out of START_OBJECT token"]
            )
        elif not body.strip():
            return error(400, [], {"comment": "Comment body can not be empty!"})
        properties = payload.get("properties") or []
        if not isinstance(properties, list) or not all(
            isinstance(p, dict) and isinstance(p.get("key"), str) and 0 < len(p["key"]) <= 255
            for p in properties
        ):
            return error(400, ["Each property needs a key of 1 to 255 characters."])
        with self._lock:
            issue = self.issues.get(key.upper())
            if issue is None:
                return error(404, [NOT_FOUND])
            self._next_id += 1
            stamp = now()
            comment = {
                "id": str(self._next_id),
                "author": user,
                "body": body,
                "created": stamp,
                "updated": stamp,
                "properties": [{"key": p["key"], "value": p.get("value")} for p in properties],
            }
            issue.setdefault("comments", []).append(comment)
            issue["updated"] = stamp
            shown = self._comment_json(comment, version, properties=False)
        return JSONResponse(shown, status_code=201)

    def _comments(self, request: Request, key: str, version: int) -> Response:
        params = request.query_params
        try:
            start, limit = int(params.get("startAt") or 0), int(params.get("maxResults") or 50)
        except ValueError:
            return error(400, ["startAt and maxResults must be numbers."])
        order = params.get("orderBy") or "created"
        if order not in {"created", "+created", "-created"}:
            return error(400, [f"Invalid orderBy: {order}"])
        properties = "properties" in (params.get("expand") or "")
        with self._lock:
            issue = self.issues.get(key.upper())
            if issue is None:
                return error(404, [NOT_FOUND])
            comments = list(issue.get("comments", []))
            if order == "-created":
                comments.reverse()
            page = [
                self._comment_json(c, version, properties=properties)
                for c in comments[start : start + limit]
            ]
        return JSONResponse(
            {"startAt": start, "maxResults": limit, "total": len(comments), "comments": page}
        )

    def _link_types(self) -> Response:
        return JSONResponse(
            {
                "issueLinkTypes": [
                    {"id": i, "name": n, "inward": inward, "outward": outward}
                    for i, n, inward, outward in LINK_TYPES
                ]
            }
        )

    def _link(self, payload: Any) -> Response:
        if not isinstance(payload, dict):
            return error(400, ["Request body must be a JSON object."])
        wanted = payload.get("type") or {}
        kind = next(
            (t for t in LINK_TYPES if wanted.get("id") == t[0] or wanted.get("name") == t[1]),
            None,
        )
        if kind is None:
            return error(404, [f"No issue link type with name '{wanted.get('name')}' found."])
        keys = []
        for side in ("inwardIssue", "outwardIssue"):
            ref = payload.get(side) or {}
            found = self._issue_by(ref)
            if found is None:
                return error(404, ["Issue Does Not Exist"])
            keys.append(found)
        if keys[0] == keys[1]:
            return error(400, ["You cannot link an issue to itself."])
        link = {"type": kind[1], "inward": keys[0], "outward": keys[1]}
        with self._lock:
            if link not in self.links:
                self.links.append(link)
        return Response(status_code=201)

    def _issue_by(self, ref: Any) -> str | None:
        if not isinstance(ref, dict):
            return None
        with self._lock:
            if str(ref.get("key") or "").upper() in self.issues:
                return str(ref["key"]).upper()
            return next((k for k, i in self.issues.items() if i["id"] == ref.get("id")), None)

    def _links_of(self, key: str) -> list[dict[str, Any]]:
        """An issue's ``issuelinks`` field: each link read from this issue's side."""
        shown = []
        for number, link in enumerate(self.links):
            kind = next(t for t in LINK_TYPES if t[1] == link["type"])
            type_json = {"id": kind[0], "name": kind[1], "inward": kind[2], "outward": kind[3]}
            if link["inward"] == key:
                other = {"outwardIssue": {"key": link["outward"]}}
            elif link["outward"] == key:
                other = {"inwardIssue": {"key": link["inward"]}}
            else:
                continue
            shown.append({"id": str(20000 + number), "type": type_json, **other})
        return shown
