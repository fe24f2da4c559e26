"""What the CRM fakes share: HTTPS on 127.0.0.1 with the test run's CA, the requests they
received, the connections (so TLS handshakes) they accepted, the time spent answering, and
the trouble a test scripts (tests/fakes/jira_faults.py: fail, hang, reset).

A subclass answers with ``answer(request, record, payload)``; ``GET /_fake/stats`` (not of
any vendor's API) gives the counts to a benchmark running the fake in another process.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.jira_faults import Fault, FaultMethods
from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread
from tests.fakes.tls import server_certificate

INVALID_JSON = object()
KEEP_ALIVE_S = 60


@dataclass
class Received:
    """One request a fake received, whatever it answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    json: Any
    form: dict[str, str]
    headers: dict[str, str]
    #: the client's (host, port): one per connection
    client: tuple[str, int] | None


class HttpsFake(FaultMethods, StopsOnExit):
    """A fake API over HTTPS on 127.0.0.1; starts serving on construction."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        #: seconds spent answering (from the request's arrival to the answer's making)
        self.handler_seconds = 0.0
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()

        async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await self._asgi(scope, receive, send)  # a function: uvicorn tells ASGI 3 by it

        # a CRM's servers keep an idle connection longer than uvicorn's 5 s
        self._served: ServedApp = serve_in_thread(
            asgi, tls=server_certificate(), keep_alive_s=KEEP_ALIVE_S
        )
        self.url = self._served.url

    # ---- test-facing API

    def calls(self, method: str | None = None, path_regex: str = ".*") -> list[Received]:
        pattern = re.compile(path_regex)
        return [
            r
            for r in list(self.requests)
            if (method is None or r.method == method.upper()) and pattern.search(r.path)
        ]

    def reset(self) -> None:
        """Forget the requests and the scripted trouble (the records stay): for a fake shared
        by several tests."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self.handler_seconds = 0.0

    @property
    def connections(self) -> int:
        """How many connections (each a TLS handshake) the requests came on."""
        return len({r.client for r in list(self.requests)})

    def stop(self) -> None:
        self._stopping.set()
        self._served.stop()

    # ---- for the subclass

    def answer(self, request: Request, record: Received, payload: Any) -> Response:
        raise NotImplementedError

    def fault_body(self, status: int) -> Any:
        """The body of a scripted failure with no body of its own."""
        return {"message": f"HTTP {status}"}

    # ---- plumbing

    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        # the transport, to drop a connection unanswered (as FakeJira does)
        scope.setdefault("state", {})["transport"] = getattr(
            getattr(send, "__self__", None), "transport", None
        )
        request = Request(scope, receive)
        response = await self._handle(request)
        await response(scope, receive, send)

    async def _handle(self, request: Request) -> Response:
        started = time.perf_counter()
        body = await request.body()
        content_type = request.headers.get("content-type", "")
        form: dict[str, str] = {}
        payload: Any = None
        if "application/x-www-form-urlencoded" in content_type:
            form = {k: str(v) for k, v in (await request.form()).items()}
        elif body:
            try:
                payload = json.loads(body)
            except ValueError:
                payload = INVALID_JSON
        client = request.client
        record = Received(
            method=request.method,
            path=request.url.path,
            query={k: request.query_params.getlist(k) for k in request.query_params},
            json=None if payload is INVALID_JSON else payload,
            form=form,
            headers=dict(request.headers),
            client=(client.host, client.port) if client else None,
        )
        if record.path == "/_fake/stats":
            return JSONResponse(self._stats())
        with self._lock:
            self.requests.append(record)
        fault = self._take_fault(record.method, record.path)
        if fault and fault.kind == "hang" and not fault.after:
            await self._sleep(fault.seconds)
        if fault and fault.kind == "fail":
            self._count(started)
            return self._failure(fault)
        if fault and fault.kind == "reset" and fault.before:
            return await self._drop(request)
        response = self.answer(request, record, payload)
        self._count(started)
        if fault and fault.kind == "reset":
            return await self._drop(request)
        if fault and fault.kind == "hang" and fault.after:
            await self._sleep(fault.seconds)
        return response

    def _count(self, started: float) -> None:
        with self._lock:
            self.handler_seconds += time.perf_counter() - started

    def _stats(self) -> dict[str, Any]:
        return {
            "requests": len(self.requests),
            "connections": self.connections,
            "handler_seconds": self.handler_seconds,
        }

    def _failure(self, fault: Fault) -> Response:
        body = fault.body if fault.body is not None else self.fault_body(fault.status)
        if isinstance(body, str | bytes):
            response: Response = Response(body, status_code=fault.status, media_type="text/plain")
        else:
            response = JSONResponse(body, status_code=fault.status)
        response.headers.update(fault.headers)
        return response

    async def _sleep(self, seconds: float) -> None:
        await asyncio.to_thread(self._stopping.wait, seconds)

    async def _drop(self, request: Request) -> Response:
        transport = request.scope.get("state", {}).get("transport")
        if transport is None:
            raise RuntimeError("fake: connection reset")
        transport.abort()
        await asyncio.sleep(0.01)
        return Response(status_code=500)  # never sent: the connection is closed
