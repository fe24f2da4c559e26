"""A fake Slack Socket Mode endpoint, for tests: a websocket server on 127.0.0.1 (aiohttp, in
its own thread) that sends envelopes the way Slack does and records the acknowledgements.

    socket = FakeSocketMode()
    slack = FakeSlackWithSocketMode(socket, app_token="xapp-test")  # apps.connections.open
    ...                                     # start the bot in Socket Mode against slack.api_url
    socket.wait_connected()
    envelope = socket.send_event(json.loads(event_payload({...})))
    socket.wait_acked(envelope)
    socket.stop(); slack.stop()
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

from aiohttp import WSMsgType, web
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.slack_server import FakeSlack

__all__ = ["FakeSlackWithSocketMode", "FakeSocketMode"]


class FakeSocketMode:
    """Serves one websocket path; every connection gets ``hello``, then the envelopes."""

    def __init__(self) -> None:
        self.acks: dict[str, float] = {}  # envelope_id -> when the ack arrived
        self.sent: dict[str, float] = {}  # envelope_id -> when it was sent
        self.connections = 0
        self._sockets: list[web.WebSocketResponse] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(started,), name="fake-socket-mode", daemon=True
        )
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the fake Socket Mode server did not start")
        self.url = f"ws://127.0.0.1:{self._port}/link"

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/link", self._websocket)
        self._runner = web.AppRunner(app, handle_signals=False)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        started.set()
        self._loop.run_forever()

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        with self._lock:
            self.connections += 1
            self._sockets.append(socket)
        await socket.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        async for message in socket:
            if message.type == WSMsgType.TEXT:
                envelope_id = json.loads(message.data).get("envelope_id")
                if envelope_id:
                    with self._lock:
                        self.acks.setdefault(envelope_id, time.monotonic())
        with self._lock:
            self._sockets.remove(socket)
        return socket

    def send_event(
        self,
        payload: dict[str, Any],
        *,
        retry_attempt: int = 0,
        retry_reason: str = "",
    ) -> str:
        """Send an ``events_api`` envelope on the newest connection; its envelope_id."""
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }

        async def send() -> None:
            await self._sockets[-1].send_str(json.dumps(envelope))  # IndexError: nobody connected

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(5)
        with self._lock:
            self.sent[envelope_id] = time.monotonic()
        return envelope_id

    def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask the newest connection to go, as Slack does before it recycles one: the
        client should open a new one (and Slack would then close the old)."""
        message = json.dumps({"type": "disconnect", "reason": reason, "debug_info": {}})
        asyncio.run_coroutine_threadsafe(self._sockets[-1].send_str(message), self._loop).result(5)

    def close_newest(self) -> None:
        """Close the newest connection from the server's side, without a word first."""
        asyncio.run_coroutine_threadsafe(self._sockets[-1].close(), self._loop).result(5)

    def wait_connected(self, timeout: float = 10, connections: int = 1) -> None:
        """Until ``connections`` connections were opened in all, one of them still open."""
        self._wait(
            lambda: bool(self._sockets) and self.connections >= connections,
            timeout,
            f"no Socket Mode connection number {connections}",
        )

    def wait_acked(self, envelope_id: str, timeout: float = 5) -> float:
        """Seconds between sending the envelope and its ack."""
        self._wait(lambda: envelope_id in self.acks, timeout, f"{envelope_id} not acked")
        with self._lock:
            return self.acks[envelope_id] - self.sent.get(envelope_id, self.acks[envelope_id])

    def _wait(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if check():
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"FakeSocketMode: {what} within {timeout}s")
            time.sleep(0.01)

    def stop(self) -> None:
        async def close() -> None:
            for socket in list(self._sockets):
                await socket.close()
            await self._runner.cleanup()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class FakeSlackWithSocketMode(FakeSlack):
    """FakeSlack that also answers ``apps.connections.open`` (with the app-level token) by
    pointing at a FakeSocketMode."""

    def __init__(self, socket_mode: FakeSocketMode, app_token: str = "xapp-test", **kwargs: Any):
        self.socket_mode = socket_mode
        self.app_token = app_token
        self.connections_opened = 0
        super().__init__(**kwargs)

    async def _endpoint(self, request: Request) -> Response:  # type: ignore[override]
        if request.path_params["method"] != "apps.connections.open":
            return await super()._endpoint(request)
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if token != self.app_token:
            return JSONResponse({"ok": False, "error": "invalid_auth"})
        self.connections_opened += 1
        return JSONResponse({"ok": True, "url": self.socket_mode.url})
