"""The fake Jira's search: its JQL subset (see tests/fakes/jira_server.py), a query parsed
and run over the fake's issues, or refused as Jira refuses one it cannot parse; and the two
search endpoints (Cloud's /search/jql, paged by token; Server's /search, by offset)."""

from __future__ import annotations

import base64
import json
import re
import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.jira_answers import PRIORITIES, error, field_set


class JqlError(ValueError):
    """The query is outside the subset (or wrong); answered with 400."""


_TOKEN = re.compile(
    r"""\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|(!=|>=|<=|[=~<>(),])|([^\s=!~<>(),"']+))"""
)
_EQ_FIELDS = {
    "project",
    "key",
    "issuekey",
    "status",
    "issuetype",
    "type",
    "priority",
    "labels",
    "assignee",
    "reporter",
}
_TEXT_FIELDS = {"text", "summary", "description"}
_ORDER_FIELDS = {"key", "created", "updated", "priority", "summary", "status"}


def _tokens(jql: str) -> list[tuple[str, str]]:
    """(kind, value): kind is "str" (quoted), "op" or "word"."""
    tokens: list[tuple[str, str]] = []
    position = 0
    jql = jql.rstrip()
    while position < len(jql):
        match = _TOKEN.match(jql, position)
        if not match or match.end() == position:
            raise JqlError(f"unexpected character at position {position + 1}")
        double, single, op, word = match.groups()
        if double is not None or single is not None:
            text = double if double is not None else single
            tokens.append(("str", re.sub(r"\\(.)", r"\1", text)))
        elif op is not None:
            tokens.append(("op", op))
        else:
            tokens.append(("word", word))
        position = match.end()
    return tokens


def run_jql(
    jql: str,
    issues: list[dict[str, Any]],
    projects: dict[str, dict[str, Any]],
    user: dict[str, Any],
) -> list[dict[str, Any]]:
    tokens = _tokens(jql)
    clauses: list[tuple[str, str, str | None]] = []
    order: list[tuple[str, bool]] = []
    i = 0

    def peek(offset: int = 0) -> tuple[str, str] | None:
        return tokens[i + offset] if i + offset < len(tokens) else None

    def is_word(token: tuple[str, str] | None, word: str) -> bool:
        return token is not None and token[0] == "word" and token[1].lower() == word

    while i < len(tokens) and not is_word(peek(), "order"):
        if clauses:
            if not is_word(peek(), "and"):
                got = peek()
                raise JqlError(f"expecting 'AND' or 'ORDER BY' but got '{got[1] if got else ''}'")
            i += 1
        name_token, op_token, value_token = peek(), peek(1), peek(2)
        if name_token is None or name_token[0] == "op":
            raise JqlError("expecting a field name")
        name = name_token[1].lower()
        if op_token is None or op_token[0] != "op":
            raise JqlError(f"expecting an operator after '{name_token[1]}'")
        op = op_token[1]
        if value_token is None or value_token[0] == "op":
            raise JqlError(f"expecting a value after '{name_token[1]} {op}'")
        value: str | None = value_token[1]
        i += 3
        if value_token[0] == "word" and value_token[1].lower() == "currentuser":
            if not (peek() == ("op", "(") and peek(1) == ("op", ")")):
                raise JqlError("currentUser needs '()'")
            i += 2
            value = user.get("displayName")
        elif value_token[0] == "word" and value_token[1].lower() in {"empty", "null"}:
            value = None
        if name in _EQ_FIELDS:
            if op not in {"=", "!="}:
                raise JqlError(f"the operator '{op}' is not supported by the '{name}' field")
        elif name in _TEXT_FIELDS:
            if op != "~":
                raise JqlError(f"the operator '{op}' is not supported by the '{name}' field")
        else:
            raise JqlError(f"Field '{name_token[1]}' does not exist or you do not have permission")
        if name == "project" and value is not None:
            if not any(value.upper() in (p["key"], p["name"].upper()) for p in projects.values()):
                raise JqlError(f"The value '{value}' does not exist for the field 'project'.")
        clauses.append((name, op, value))

    if i < len(tokens):
        i += 1
        if not is_word(peek(), "by"):
            raise JqlError("expecting 'BY' after 'ORDER'")
        i += 1
        while True:
            token = peek()
            if token is None or token[1].lower() not in _ORDER_FIELDS:
                raise JqlError(f"Not able to sort using field '{token[1] if token else ''}'")
            i += 1
            descending = False
            if is_word(peek(), "asc") or is_word(peek(), "desc"):
                descending = peek()[1].lower() == "desc"  # type: ignore[index]
                i += 1
            order.append((token[1].lower(), descending))
            if peek() == ("op", ","):
                i += 1
                continue
            if peek() is not None:
                raise JqlError(f"unexpected '{peek()[1]}' after ORDER BY")  # type: ignore[index]
            break

    found = [issue for issue in issues if all(_matches(issue, c) for c in clauses)]
    found.sort(key=lambda x: _sort_key(x, "key"), reverse=True)  # Jira's default: newest key
    for name, descending in reversed(order):
        found.sort(key=lambda x, n=name: _sort_key(x, n), reverse=descending)
    return found


def _matches(issue: dict[str, Any], clause: tuple[str, str, str | None]) -> bool:
    name, op, value = clause
    if name in _TEXT_FIELDS:
        needle = (value or "").lower()
        haystack = {
            "text": f"{issue['summary']}\n{issue['description'] or ''}",
            "summary": issue["summary"],
            "description": issue["description"] or "",
        }[name].lower()
        return needle in haystack
    actual: Any = {
        "project": issue["project"],
        "key": issue["key"],
        "issuekey": issue["key"],
        "status": issue["status"],
        "issuetype": issue["issuetype"],
        "type": issue["issuetype"],
        "priority": issue["priority"],
        "labels": issue["labels"],
        "assignee": issue["assignee"],
        "reporter": issue["reporter"],
    }[name]
    if isinstance(actual, list):
        equal = (not actual) if value is None else value.lower() in [a.lower() for a in actual]
    elif value is None:
        equal = actual is None
    else:
        equal = actual is not None and actual.lower() == value.lower()
    return equal if op == "=" else not equal


def _sort_key(issue: dict[str, Any], name: str) -> Any:
    if name == "key":
        project, _, number = issue["key"].rpartition("-")
        return (project, int(number))
    if name == "priority":
        return PRIORITIES.index(issue["priority"]) if issue["priority"] in PRIORITIES else 99
    return str(issue.get(name) or "")


class SearchMethods:
    """Mixed into FakeJira: the search endpoints, over its issues and projects."""

    issues: dict[str, dict[str, Any]]
    projects: dict[str, dict[str, Any]]
    _lock: threading.Lock
    _issue_json: Any

    def _search(
        self, request: Request, payload: Any, *, new_api: bool, user: dict[str, Any]
    ) -> Response:
        if request.method == "POST":
            if not isinstance(payload, dict):
                return error(400, ["Request body must be a JSON object."])
            allowed = (
                {
                    "jql",
                    "nextPageToken",
                    "maxResults",
                    "fields",
                    "expand",
                    "properties",
                    "fieldsByKeys",
                    "failFast",
                    "reconcileIssues",
                }
                if new_api
                else {"jql", "startAt", "maxResults", "fields", "expand", "validateQuery"}
            )
            unknown = [k for k, v in payload.items() if k not in allowed and v is not None]
            if unknown:
                return error(400, [f'Unrecognized field "{unknown[0]}"'])
            params = payload
            fields = set(payload["fields"]) if payload.get("fields") else None
        else:
            params = {k: request.query_params.get(k) for k in request.query_params}
            fields = field_set(request, None)
        jql = params.get("jql") or ""
        try:
            max_results = int(params.get("maxResults") or 50)
            start = (
                decode_token(params.get("nextPageToken"))
                if new_api
                else int(params.get("startAt") or 0)
            )
        except ValueError:
            return error(400, ["Invalid pagination parameters."])
        if new_api and fields is None:
            fields = {"id"}
        max_results = max(0, min(max_results, 5000 if new_api else 1000))
        with self._lock:
            try:
                found = run_jql(jql, list(self.issues.values()), self.projects, user)
            except JqlError as exc:
                return error(400, [f"Error in the JQL Query: {exc}"])
            page = found[start : start + max_results]
            issues = [self._issue_json(request, issue, fields) for issue in page]
        if new_api:
            for item in issues:
                if fields == {"id"}:
                    item.pop("key", None)
                    item["fields"] = {}
            more = start + len(page) < len(found)
            body: dict[str, Any] = {"issues": issues, "isLast": not more}
            if more:
                body["nextPageToken"] = encode_token(start + len(page))
            return JSONResponse(body)
        return JSONResponse(
            {
                "expand": "schema,names",
                "startAt": start,
                "maxResults": max_results,
                "total": len(found),
                "issues": issues,
            }
        )


def encode_token(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def decode_token(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("bad token") from exc
