"""A strict fake of the Jira REST API (Cloud or Server/Data Center), for tests.

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

The writes on an issue, a module each: comments with properties and links (jira_comments),
transitions whose screens may require fields (``screens={"Done": ["resolution"]}``) and
edits (jira_workflow), users (``add_user``), their search and assignment (jira_people).
Cloud also serves API v3, whose rich text must be an ADF document where v2's must be a
string (jira_adf); Server has no v3 (404). ``projects={"TASK": {"modify_reporter": True}}``
lets the bot set a new issue's reporter there.

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
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.jira_answers import PRIORITIES, error, field_listing, jira_user, now
from tests.fakes.jira_comments import CommentMethods
from tests.fakes.jira_faults import Fault, FaultMethods, fault_response
from tests.fakes.jira_issues import IssueMethods
from tests.fakes.jira_jql import SearchMethods
from tests.fakes.jira_people import PeopleMethods
from tests.fakes.jira_workflow import WorkflowMethods
from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread

__all__ = ["FakeJira", "RecordedRequest"]

API = r"/rest/api/(?:2|latest)"
DEFAULT_ISSUE_TYPES = ("Task", "Bug", "Story", "Epic")


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


class FakeJira(
    IssueMethods,
    SearchMethods,
    PeopleMethods,
    WorkflowMethods,
    CommentMethods,
    FaultMethods,
    StopsOnExit,
):
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
        screens: dict[str, list[str]] | None = None,
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
                # the bot may set an issue's reporter here (Modify Reporter, on the screen)
                "modify_reporter": bool(config.get("modify_reporter", False)),
                "next": 1,
            }
        #: every issue by key: seeded with add_issue() and created through the API
        self.issues: dict[str, dict[str, Any]] = {}
        #: keys of the issues created through POST /rest/api/2/issue, in order
        self.created: list[str] = []
        self.requests: list[RecordedRequest] = []
        #: users by account id (Cloud) or name (Server), added with add_user
        self.users: dict[str, dict[str, Any]] = {}
        self.unassignable: set[str] = set()
        #: issue links, each {"type": name, "inward": key, "outward": key}
        self.links: list[dict[str, str]] = []
        #: target status -> the fields its transition's screen requires
        self.screens = {k: list(v) for k, v in (screens or {}).items()}
        self._faults: list[Fault] = []
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
            payload = INVALID_JSON
        authorization = request.headers.get("authorization", "")
        record = RecordedRequest(
            method=request.method,
            path=request.url.path,
            query={k: request.query_params.getlist(k) for k in request.query_params},
            json=None if payload is INVALID_JSON else payload,
            auth=authorization.split(" ", 1)[0].lower() if authorization else None,
            headers=dict(request.headers),
        )
        with self._lock:
            self.requests.append(record)

        fault = self._take_fault(record.method, record.path)
        if fault and fault.kind == "hang" and not fault.after:
            await self._sleep(fault.seconds)
        if fault and fault.kind == "fail":
            return fault_response(fault)
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
            return error(
                401,
                ["You are not authenticated. Authentication required to perform this operation."],
            )
        if payload is INVALID_JSON:
            return error(400, ["Unexpected character in the request body: not valid JSON."])
        if method in {"POST", "PUT"} and "application/json" not in request.headers.get(
            "content-type", ""
        ):
            return error(415, ["Content-Type must be application/json."])
        versioned = re.fullmatch(r"/rest/api/(2|3|latest)(/.*)", path)
        if versioned is None or (versioned.group(1) == "3" and self.deployment != "Cloud"):
            return error(404, [f"fake Jira: no route for {method} {path}"])
        version = 3 if versioned.group(1) == "3" else 2
        route = self._route(request, versioned.group(2), method, payload, user, version)
        return route or error(404, [f"fake Jira: no route for {method} {path}"])

    def _route(
        self,
        request: Request,
        path: str,
        method: str,
        payload: Any,
        user: dict[str, Any],
        version: int,
    ) -> Response | None:
        """The answer of the endpoint ``path`` (below /rest/api/N) names; None: no such."""
        if path == "/issue/createmeta" and method == "GET":
            return JSONResponse(self._createmeta(request))
        if match := re.fullmatch(r"/issue/([^/]+)/comment", path):
            if method == "POST":
                return self._add_comment(match.group(1), payload, user, version)
            return self._comments(request, match.group(1), version) if method == "GET" else None
        if match := re.fullmatch(r"/issue/([^/]+)/transitions", path):
            if method == "POST":
                return self._transition(match.group(1), payload)
            return self._transitions(request, match.group(1)) if method == "GET" else None
        if (match := re.fullmatch(r"/issue/([^/]+)/assignee", path)) and method == "PUT":
            return self._assign(match.group(1), payload)
        if match := re.fullmatch(r"/issue/([^/]+)", path):
            if method == "PUT":
                return self._edit(match.group(1), payload, version)
            if method != "GET":
                return error(405, [f"{method} is not supported here."])
            return self._get_issue(request, match.group(1), version)
        if path == "/issue":
            if method != "POST":
                return error(405, [f"{method} is not supported here."])
            return self._create_issue(request, payload, user, version)
        if path == "/search/jql" and method in {"GET", "POST"}:
            if self.deployment != "Cloud":
                return error(404, ["null for uri: " + str(request.url)])
            return self._search(request, payload, new_api=True, user=user)
        if path == "/search" and method in {"GET", "POST"}:
            if self.deployment == "Cloud":
                return error(
                    410,
                    [
                        "The requested API has been removed. Please migrate to the "
                        "/rest/api/3/search/jql API. A full migration guideline is available "
                        "at https://developer.atlassian.com/changelog/#CHANGE-2046"
                    ],
                )
            return self._search(request, payload, new_api=False, user=user)
        if path in ("/user/search", "/user/assignable/search") and method == "GET":
            return self._search_users(request, assignable="assignable" in path)
        if path == "/issueLinkType" and method == "GET":
            return self._link_types()
        if path == "/issueLink" and method == "POST":
            return self._link(payload)
        return self._other(request, path, method, user)

    def _other(
        self, request: Request, path: str, method: str, user: dict[str, Any]
    ) -> Response | None:
        if path == "/field" and method == "GET":
            return JSONResponse(field_listing(self.required_fields))
        if path == "/project" and method == "GET":
            return JSONResponse([self._project_json(request, p) for p in self.projects.values()])
        if match := re.fullmatch(r"/project/([^/]+)", path):
            project = self._project(match.group(1))
            if project is None:
                return error(404, [f"No project could be found with key '{match.group(1)}'."])
            return JSONResponse(self._project_json(request, project))
        if path == "/priority" and method == "GET":
            return JSONResponse(
                [{"id": str(i + 1), "name": name} for i, name in enumerate(PRIORITIES)]
            )
        if path == "/myself" and method == "GET":
            return JSONResponse(user)
        return None

    def _authenticate(self, header: str | None) -> dict[str, Any] | None:
        if not (self.email or self.api_token or self.pat):
            return jira_user("Anonymous", self.deployment, name="anonymous")
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() == "basic" and self.email and self.api_token:
            try:
                email, _, token = base64.b64decode(value).decode().partition(":")
            except ValueError:
                return None
            if email == self.email and token == self.api_token:
                return jira_user("Bot User", self.deployment, email=email, name="bot")
        if self.deployment == "Server" and scheme.lower() == "bearer" and value == self.pat:
            return jira_user("Bot User", "Server", name="bot")
        return None

    def _server_info(self, request: Request) -> dict[str, Any]:
        cloud = self.deployment == "Cloud"
        return {
            "baseUrl": str(request.base_url).rstrip("/"),
            "version": "1001.0.0-SNAPSHOT" if cloud else "9.12.2",
            "versionNumbers": [1001, 0, 0] if cloud else [9, 12, 2],
            "deploymentType": self.deployment,
            "buildNumber": 100283 if cloud else 9120002,
            "serverTime": now(),
            "scmInfo": "fake",
            "serverTitle": "Fake Jira",
        }


INVALID_JSON = object()
