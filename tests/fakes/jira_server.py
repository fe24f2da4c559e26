"""A strict fake of the Jira REST API v2 (Cloud or Server/Data Center), for tests.

It is reached by the real ``jira`` client over real HTTP on 127.0.0.1:

    fake = FakeJira(email="bot@example.com", api_token="tok", projects={"TASK": {}},
                    required_fields={"TASK": ["components"]})
    fake.add_issue("TASK-1", summary="Login fails", status="In Progress")
    ...                                  # JIRA_URL = fake.url
    assert fake.created == ["TASK-2"]
    assert fake.requests[-1].path == "/rest/api/2/issue"
    fake.stop()

Cloud mode (the default unless only ``pat`` is given) serves the new search endpoint
``/rest/api/2/search/jql`` (the old ``/rest/api/2/search`` answers 410 Gone, as on Cloud).
Server mode (``deployment="Server"``, the default with only ``pat``) serves the old
``/rest/api/2/search`` (``/search/jql`` is 404). Credentials: Basic ``email:api_token`` when
those are given, ``Authorization: Bearer PAT`` in Server mode when ``pat`` is given; anything
else is 401. A fake without credentials accepts anonymous requests.

Faults, applied to the next requests whose path matches ``path_regex`` (``re.search``) and,
when given, whose method matches; each is consumed once per matching request, ``times`` times:

* ``fail_next(path_regex, status, headers={}, body=None, times=1)``: answer that instead;
* ``reset_connection_next(path_regex, before=False)``: handle the request (a create is
  stored) and then drop the connection without answering; ``before=True`` drops it first;
* ``hang_next(seconds, path_regex=".*", after=False)``: wait that long, then handle the
  request; ``after=True``: handle it (a create is stored), then wait before answering.

JQL subset: clauses joined by AND (``project``, ``key``/``issuekey``, ``status``,
``issuetype``/``type``, ``priority``, ``labels``, ``assignee`` with ``=``/``!=``; ``text``,
``summary``, ``description`` with ``~``), then ``ORDER BY field [ASC|DESC], ...``. Anything
else is a 400 "Error in the JQL Query", as a real Jira answers a query it cannot parse.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread

__all__ = ["FakeJira", "RecordedRequest"]

API = r"/rest/api/(?:2|latest)"
DEFAULT_ISSUE_TYPES = ("Task", "Bug", "Story", "Epic")
PRIORITIES = ("Highest", "High", "Medium", "Low", "Lowest")
STATUS_CATEGORIES = {"To Do": "new", "In Progress": "indeterminate", "Done": "done"}
#: fields a create may set besides the project's required ones
SETTABLE_FIELDS = {
    "project",
    "issuetype",
    "summary",
    "description",
    "priority",
    "labels",
    "assignee",
    "components",
    "duedate",
}
FIELD_NAMES = {
    "summary": "Summary",
    "description": "Description",
    "components": "Component/s",
    "priority": "Priority",
    "labels": "Labels",
    "assignee": "Assignee",
    "duedate": "Due date",
}
NOT_FOUND = "Issue does not exist or you do not have permission to see it."


@dataclass
class RecordedRequest:
    """One request the fake received, whatever it answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    json: Any
    #: "basic", "bearer", another scheme in lower case, or None without Authorization
    auth: str | None
    headers: dict[str, str]


@dataclass
class _Fault:
    kind: str  # "fail" | "reset" | "hang"
    pattern: re.Pattern[str]
    method: str | None
    times: int
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    seconds: float = 0.0
    before: bool = False
    after: bool = False

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method:
            return False
        return bool(self.pattern.search(path))


class JqlError(ValueError):
    """The query is outside the subset (or wrong); answered with 400."""


class FakeJira(StopsOnExit):
    """A strict fake Jira REST server on 127.0.0.1; starts serving on construction."""

    def __init__(
        self,
        *,
        email: str | None = None,
        api_token: str | None = None,
        pat: str | None = None,
        projects: dict[str, dict[str, Any]] | None = None,
        required_fields: dict[str, list[str]] | None = None,
        deployment: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.email = email
        self.api_token = api_token
        self.pat = pat
        self.deployment = deployment or ("Server" if pat and not email else "Cloud")
        if self.deployment not in {"Cloud", "Server"}:
            raise ValueError("deployment is 'Cloud' or 'Server'")
        self.required_fields = {k.upper(): list(v) for k, v in (required_fields or {}).items()}
        self.projects: dict[str, dict[str, Any]] = {}
        for number, (key, config) in enumerate((projects or {"TASK": {}}).items()):
            self.projects[key.upper()] = {
                "id": str(10000 + number),
                "key": key.upper(),
                "name": config.get("name", f"{key.title()} project"),
                "issue_types": list(config.get("issue_types", DEFAULT_ISSUE_TYPES)),
                "next": 1,
            }
        #: every issue by key: seeded with add_issue() and created through the API
        self.issues: dict[str, dict[str, Any]] = {}
        #: keys of the issues created through POST /rest/api/2/issue, in order
        self.created: list[str] = []
        self.requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        self._next_id = 10000
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        app = Starlette(
            routes=[
                Route(
                    "/{path:path}",
                    self._handle,
                    methods=["GET", "POST", "PUT", "DELETE"],
                )
            ]
        )
        self._app = app

        async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await self._asgi(scope, receive, send)

        self._served: ServedApp = serve_in_thread(asgi, host=host)
        self.url = self._served.url

    # ---- test-facing API

    def add_issue(
        self,
        key: str,
        summary: str = "An issue",
        description: str | None = None,
        status: str = "To Do",
        *,
        issue_type: str = "Task",
        priority: str | None = "Medium",
        assignee: str | None = None,
        reporter: str | None = "Reporter Person",
        labels: list[str] | None = None,
        created: str | None = None,
    ) -> dict[str, Any]:
        """Add an issue as if it existed in Jira; its project must be one of ``projects``."""
        key = key.upper()
        project_key, _, number = key.rpartition("-")
        project = self.projects.get(project_key)
        if project is None or not number.isdigit():
            raise ValueError(f"{key}: no project {project_key} in this fake")
        with self._lock:
            project["next"] = max(project["next"], int(number) + 1)
            return self._store(
                project,
                key,
                {
                    "summary": summary,
                    "description": description,
                    "issuetype": issue_type,
                    "status": status,
                    "priority": priority,
                    "assignee": assignee,
                    "reporter": reporter,
                    "labels": list(labels or []),
                },
                created=created,
            )

    def fail_next(
        self,
        path_regex: str,
        status: int,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        *,
        method: str | None = None,
    ) -> None:
        """Answer the next matching request(s) with ``status`` (a Jira-shaped body by default)."""
        self._add(
            _Fault("fail", re.compile(path_regex), method, times, status, dict(headers or {}), body)
        )

    def reset_connection_next(
        self,
        path_regex: str,
        times: int = 1,
        *,
        method: str | None = None,
        before: bool = False,
    ) -> None:
        """Drop the connection of the next matching request(s) without an answer: after
        handling it (a create is stored) or, with ``before=True``, instead of handling it."""
        self._add(_Fault("reset", re.compile(path_regex), method, times, before=before))

    def hang_next(
        self,
        seconds: float,
        path_regex: str = ".*",
        times: int = 1,
        *,
        method: str | None = None,
        after: bool = False,
    ) -> None:
        """Wait ``seconds`` before handling the next matching request(s); ``after=True``:
        handle it first (a create is stored), then wait before answering."""
        self._add(
            _Fault("hang", re.compile(path_regex), method, times, seconds=seconds, after=after)
        )

    def calls(self, method: str | None = None, path_regex: str = ".*") -> list[RecordedRequest]:
        """The recorded requests with that method and a path matching ``path_regex``."""
        pattern = re.compile(path_regex)
        return [
            r
            for r in list(self.requests)
            if (method is None or r.method == method.upper()) and pattern.search(r.path)
        ]

    def stop(self) -> None:
        self._stopping.set()
        self._served.stop()

    def __repr__(self) -> str:
        return f"FakeJira({self.url!r}, {self.deployment}, issues={len(self.issues)})"

    # ---- plumbing

    def _add(self, fault: _Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None

    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # the server's per-request send is a bound method of uvicorn's request cycle, which
        # holds the connection's transport: the only way to drop a connection unanswered
        if scope["type"] == "http":
            scope.setdefault("state", {})["transport"] = getattr(
                getattr(send, "__self__", None), "transport", None
            )
        await self._app(scope, receive, send)

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = _INVALID_JSON
        authorization = request.headers.get("authorization", "")
        record = RecordedRequest(
            method=request.method,
            path=request.url.path,
            query={k: request.query_params.getlist(k) for k in request.query_params},
            json=None if payload is _INVALID_JSON else payload,
            auth=authorization.split(" ", 1)[0].lower() if authorization else None,
            headers=dict(request.headers),
        )
        with self._lock:
            self.requests.append(record)

        fault = self._take_fault(record.method, record.path)
        if fault and fault.kind == "hang" and not fault.after:
            await self._sleep(fault.seconds)
        if fault and fault.kind == "fail":
            return _fault_response(fault)
        if fault and fault.kind == "reset" and fault.before:
            return await self._drop(request)

        response = self._answer(request, record, payload)
        if fault and fault.kind == "reset":
            return await self._drop(request)
        if fault and fault.kind == "hang" and fault.after:
            await self._sleep(fault.seconds)
        return response

    async def _sleep(self, seconds: float) -> None:
        # a thread waits, so stop() ends the hang at once
        await asyncio.to_thread(self._stopping.wait, seconds)

    async def _drop(self, request: Request) -> Response:
        transport = request.scope.get("state", {}).get("transport")
        if transport is None:  # not under uvicorn: a 500 is the closest
            raise RuntimeError("fake: connection reset")
        transport.abort()
        await asyncio.sleep(0.01)  # let the server see the connection is gone
        return Response(status_code=500)  # never sent: the connection is closed

    # ---- the API

    def _answer(self, request: Request, record: RecordedRequest, payload: Any) -> Response:
        path, method = record.path, record.method
        if re.fullmatch(f"{API}/serverInfo", path) and method == "GET":
            return JSONResponse(self._server_info(request))
        user = self._authenticate(request.headers.get("authorization"))
        if user is None:
            return _error(
                401,
                ["You are not authenticated. Authentication required to perform this operation."],
            )
        if payload is _INVALID_JSON:
            return _error(400, ["Unexpected character in the request body: not valid JSON."])
        if method == "POST" and "application/json" not in request.headers.get("content-type", ""):
            return _error(415, ["Content-Type must be application/json."])

        if re.fullmatch(f"{API}/issue/createmeta", path) and method == "GET":
            return JSONResponse(self._createmeta(request))
        if match := re.fullmatch(f"{API}/issue/([^/]+)", path):
            if method != "GET":
                return _error(405, [f"{method} is not supported here."])
            return self._get_issue(request, match.group(1))
        if re.fullmatch(f"{API}/issue", path):
            if method != "POST":
                return _error(405, [f"{method} is not supported here."])
            return self._create_issue(request, payload, user)
        if re.fullmatch(f"{API}/search/jql", path) and method in {"GET", "POST"}:
            if self.deployment != "Cloud":
                return _error(404, ["null for uri: " + str(request.url)])
            return self._search(request, payload, new_api=True, user=user)
        if re.fullmatch(f"{API}/search", path) and method in {"GET", "POST"}:
            if self.deployment == "Cloud":
                return _error(
                    410,
                    [
                        "The requested API has been removed. Please migrate to the "
                        "/rest/api/3/search/jql API. A full migration guideline is available "
                        "at https://developer.atlassian.com/changelog/#CHANGE-2046"
                    ],
                )
            return self._search(request, payload, new_api=False, user=user)
        if re.fullmatch(f"{API}/field", path) and method == "GET":
            return JSONResponse(_fields(self.required_fields))
        if re.fullmatch(f"{API}/project", path) and method == "GET":
            return JSONResponse([self._project_json(request, p) for p in self.projects.values()])
        if match := re.fullmatch(f"{API}/project/([^/]+)", path):
            project = self._project(match.group(1))
            if project is None:
                return _error(404, [f"No project could be found with key '{match.group(1)}'."])
            return JSONResponse(self._project_json(request, project))
        if re.fullmatch(f"{API}/priority", path) and method == "GET":
            return JSONResponse(
                [{"id": str(i + 1), "name": name} for i, name in enumerate(PRIORITIES)]
            )
        if re.fullmatch(f"{API}/myself", path) and method == "GET":
            return JSONResponse(user)
        return _error(404, [f"fake Jira: no route for {method} {path}"])

    def _authenticate(self, header: str | None) -> dict[str, Any] | None:
        if not (self.email or self.api_token or self.pat):
            return _user("Anonymous", self.deployment, name="anonymous")
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() == "basic" and self.email and self.api_token:
            try:
                email, _, token = base64.b64decode(value).decode().partition(":")
            except ValueError:
                return None
            if email == self.email and token == self.api_token:
                return _user("Bot User", self.deployment, email=email, name="bot")
        if self.deployment == "Server" and scheme.lower() == "bearer" and value == self.pat:
            return _user("Bot User", "Server", name="bot")
        return None

    def _server_info(self, request: Request) -> dict[str, Any]:
        cloud = self.deployment == "Cloud"
        return {
            "baseUrl": str(request.base_url).rstrip("/"),
            "version": "1001.0.0-SNAPSHOT" if cloud else "9.12.2",
            "versionNumbers": [1001, 0, 0] if cloud else [9, 12, 2],
            "deploymentType": self.deployment,
            "buildNumber": 100283 if cloud else 9120002,
            "serverTime": _now(),
            "scmInfo": "fake",
            "serverTitle": "Fake Jira",
        }

    def _project(self, key_or_id: str) -> dict[str, Any] | None:
        for project in self.projects.values():
            if key_or_id.upper() == project["key"] or key_or_id == project["id"]:
                return project
        return None

    def _project_json(self, request: Request, project: dict[str, Any]) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        return {
            "self": f"{base}/rest/api/2/project/{project['id']}",
            "id": project["id"],
            "key": project["key"],
            "name": project["name"],
            "projectTypeKey": "software",
            "issueTypes": [
                {"id": str(i + 1), "name": name, "subtask": False}
                for i, name in enumerate(project["issue_types"])
            ],
        }

    def _createmeta(self, request: Request) -> dict[str, Any]:
        keys = ",".join(request.query_params.getlist("projectKeys")).split(",")
        projects = [p for p in self.projects.values() if not keys[0] or p["key"] in keys]
        return {
            "projects": [
                {
                    "id": p["id"],
                    "key": p["key"],
                    "name": p["name"],
                    "issuetypes": [
                        {"id": str(i + 1), "name": name, "subtask": False}
                        for i, name in enumerate(p["issue_types"])
                    ],
                }
                for p in projects
            ]
        }

    def _store(
        self,
        project: dict[str, Any],
        key: str,
        values: dict[str, Any],
        created: str | None = None,
    ) -> dict[str, Any]:
        self._next_id += 1
        issue = {
            "id": str(self._next_id),
            "key": key,
            "project": project["key"],
            "created": created or _now(),
            "updated": created or _now(),
            **values,
        }
        self.issues[key] = issue
        return issue

    def _issue_json(
        self, request: Request, issue: dict[str, Any], fields: set[str] | None
    ) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        project = self.projects[issue["project"]]
        status = issue["status"]
        category = STATUS_CATEGORIES.get(status, "indeterminate")
        all_fields: dict[str, Any] = {
            "summary": issue["summary"],
            "description": issue["description"],
            "status": {
                "self": f"{base}/rest/api/2/status/1",
                "name": status,
                "id": "1",
                "statusCategory": {"key": category, "name": status},
            },
            "issuetype": {
                "name": issue["issuetype"],
                "id": str(project["issue_types"].index(issue["issuetype"]) + 1)
                if issue["issuetype"] in project["issue_types"]
                else "1",
                "subtask": False,
            },
            "priority": {"name": issue["priority"], "id": "3"} if issue["priority"] else None,
            "assignee": _user(issue["assignee"], self.deployment) if issue["assignee"] else None,
            "reporter": _user(issue["reporter"], self.deployment) if issue["reporter"] else None,
            "created": issue["created"],
            "updated": issue["updated"],
            "labels": issue["labels"],
            "components": [{"name": c} for c in issue.get("components", [])],
            "project": {"id": project["id"], "key": project["key"], "name": project["name"]},
        }
        if fields is not None and not ({"*all", "*navigable"} & fields):
            all_fields = {k: v for k, v in all_fields.items() if k in fields}
        return {
            "expand": "renderedFields,names,schema,operations,editmeta,changelog",
            "id": issue["id"],
            "self": f"{base}/rest/api/2/issue/{issue['id']}",
            "key": issue["key"],
            "fields": all_fields,
        }

    def _find_issue(self, key_or_id: str) -> dict[str, Any] | None:
        issue = self.issues.get(key_or_id.upper())
        if issue is None:
            issue = next((i for i in self.issues.values() if i["id"] == key_or_id), None)
        return issue

    def _get_issue(self, request: Request, key: str) -> Response:
        with self._lock:
            issue = self._find_issue(key)
            if issue is None:
                return _error(404, [NOT_FOUND])
            return JSONResponse(self._issue_json(request, issue, _field_set(request, None)))

    def _create_issue(self, request: Request, payload: Any, user: dict[str, Any]) -> Response:
        if not isinstance(payload, dict) or not isinstance(payload.get("fields"), dict):
            return _error(400, ["Request body must contain 'fields'."])
        fields: dict[str, Any] = payload["fields"]
        errors: dict[str, str] = {}
        project = None
        ref = fields.get("project")
        if isinstance(ref, dict) and (ref.get("key") or ref.get("id")):
            project = self._project(str(ref.get("key") or ref.get("id")))
        if project is None:
            errors["project"] = "Specify a valid project ID or key"
        issue_type = None
        ref = fields.get("issuetype")
        if project is not None:
            types = project["issue_types"]
            if isinstance(ref, dict) and ref.get("name") in types:
                issue_type = ref["name"]
            elif isinstance(ref, dict) and str(ref.get("id", "")).isdigit():
                index = int(ref["id"]) - 1
                issue_type = types[index] if 0 <= index < len(types) else None
            if issue_type is None:
                errors["issuetype"] = (
                    "Specify an issue type" if not ref else "valid issue type is required"
                )
        required = self.required_fields.get(project["key"], []) if project else []
        for name in fields:
            if name not in SETTABLE_FIELDS and name not in required:
                errors[name] = (
                    f"Field '{name}' cannot be set. It is not on the appropriate screen, "
                    "or unknown."
                )
        summary = fields.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            errors["summary"] = "You must specify a summary of the issue."
        elif len(summary) > 255:
            errors["summary"] = "Summary must be less than 255 characters."
        elif "\n" in summary or "\r" in summary:
            errors["summary"] = "The summary is invalid because it contains newline characters."
        description = fields.get("description")
        if description is not None and not isinstance(description, str):
            errors["description"] = "Operation value must be a string"
        priority = fields.get("priority")
        if priority is not None and not (
            isinstance(priority, dict) and priority.get("name") in PRIORITIES
        ):
            wanted = priority.get("name") if isinstance(priority, dict) else priority
            errors["priority"] = f"Priority name '{wanted}' is not valid"
        labels = fields.get("labels", [])
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            errors["labels"] = "Field 'labels' must be a list of strings."
        else:
            for label in labels:
                if not label or any(c.isspace() for c in label) or len(label) > 255:
                    errors["labels"] = f"The label '{label}' contains spaces which is invalid."
        for name in required:
            value = fields.get(name)
            if value in (None, "", []):
                errors[name] = f"{FIELD_NAMES.get(name, name)} is required."
        if errors:
            return JSONResponse({"errorMessages": [], "errors": errors}, status_code=400)

        assert project is not None and issue_type is not None
        with self._lock:
            key = f"{project['key']}-{project['next']}"
            project["next"] += 1
            issue = self._store(
                project,
                key,
                {
                    "summary": summary,
                    "description": description,
                    "issuetype": issue_type,
                    "status": "To Do",
                    "priority": priority["name"] if priority else "Medium",
                    "assignee": None,
                    "reporter": user["displayName"],
                    "labels": list(labels),
                    "components": [
                        c.get("name") for c in fields.get("components") or [] if isinstance(c, dict)
                    ],
                },
            )
            self.created.append(key)
        base = str(request.base_url).rstrip("/")
        return JSONResponse(
            {"id": issue["id"], "key": key, "self": f"{base}/rest/api/2/issue/{issue['id']}"},
            status_code=201,
        )

    def _search(
        self, request: Request, payload: Any, *, new_api: bool, user: dict[str, Any]
    ) -> Response:
        if request.method == "POST":
            if not isinstance(payload, dict):
                return _error(400, ["Request body must be a JSON object."])
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
                return _error(400, [f'Unrecognized field "{unknown[0]}"'])
            params = payload
            fields = set(payload["fields"]) if payload.get("fields") else None
        else:
            params = {k: request.query_params.get(k) for k in request.query_params}
            fields = _field_set(request, None)
        jql = params.get("jql") or ""
        try:
            max_results = int(params.get("maxResults") or 50)
            start = (
                _decode_token(params.get("nextPageToken"))
                if new_api
                else int(params.get("startAt") or 0)
            )
        except ValueError:
            return _error(400, ["Invalid pagination parameters."])
        if new_api and fields is None:
            fields = {"id"}
        max_results = max(0, min(max_results, 5000 if new_api else 1000))
        with self._lock:
            try:
                found = _run_jql(jql, list(self.issues.values()), self.projects, user)
            except JqlError as exc:
                return _error(400, [f"Error in the JQL Query: {exc}"])
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
                body["nextPageToken"] = _encode_token(start + len(page))
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


_INVALID_JSON = object()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def _user(
    display_name: str, deployment: str, *, email: str | None = None, name: str | None = None
) -> dict[str, Any]:
    slug = re.sub(r"[^a-z0-9]+", ".", display_name.lower()).strip(".") or "user"
    if deployment == "Cloud":
        return {
            "accountId": f"5b10a2844c20165700ede{abs(hash(slug)) % 10**6:06d}",
            "displayName": display_name,
            "emailAddress": email or f"{slug}@example.com",
            "active": True,
            "accountType": "atlassian",
        }
    return {
        "name": name or slug,
        "key": name or slug,
        "displayName": display_name,
        "emailAddress": email or f"{slug}@example.com",
        "active": True,
    }


def _error(status: int, messages: list[str], errors: dict[str, str] | None = None) -> Response:
    return JSONResponse({"errorMessages": messages, "errors": errors or {}}, status_code=status)


_DEFAULT_FAULT_MESSAGES = {
    400: "Bad request.",
    401: "You are not authenticated. Authentication required to perform this operation.",
    403: "You do not have permission to perform this operation.",
    404: NOT_FOUND,
    429: "Rate limit exceeded.",
    500: "Internal server error.",
    502: "Bad gateway.",
    503: "Service Unavailable.",
    504: "Gateway timeout.",
}


def _fault_response(fault: _Fault) -> Response:
    if fault.body is None:
        message = _DEFAULT_FAULT_MESSAGES.get(fault.status, f"HTTP {fault.status}")
        response: Response = _error(fault.status, [message])
    elif isinstance(fault.body, str | bytes):
        response = Response(fault.body, status_code=fault.status, media_type="text/plain")
    else:
        response = JSONResponse(fault.body, status_code=fault.status)
    response.headers.update(fault.headers)
    return response


def _field_set(request: Request, default: set[str] | None) -> set[str] | None:
    values = [v for raw in request.query_params.getlist("fields") for v in raw.split(",")]
    values = [v.strip() for v in values if v.strip()]
    return set(values) if values else default


def _fields(required: dict[str, list[str]]) -> list[dict[str, Any]]:
    names = {
        "summary": "Summary",
        "description": "Description",
        "status": "Status",
        "issuetype": "Issue Type",
        "priority": "Priority",
        "assignee": "Assignee",
        "reporter": "Reporter",
        "created": "Created",
        "updated": "Updated",
        "labels": "Labels",
        "components": "Component/s",
        "project": "Project",
    }
    extra = {f for fields in required.values() for f in fields if f not in names}
    result = [
        {
            "id": fid,
            "key": fid,
            "name": name,
            "custom": False,
            "navigable": True,
            "searchable": True,
            "clauseNames": [fid],
        }
        for fid, name in names.items()
    ]
    result += [
        {
            "id": fid,
            "key": fid,
            "name": fid,
            "custom": True,
            "navigable": True,
            "searchable": True,
            "clauseNames": [fid, f"cf[{fid.rsplit('_', 1)[-1]}]"],
        }
        for fid in sorted(extra)
    ]
    return result


def _encode_token(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def _decode_token(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("bad token") from exc


# ---- the JQL subset

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


def _run_jql(
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
