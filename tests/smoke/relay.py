"""A relay between the bot and llama-server that keeps what passed through it: the tests see
the request the real server answered (which tools it carried) and the server's status."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread

#: the request headers passed on (the key among them): the rest are the relay's own business
PASSED_ON = ("authorization", "content-type", "accept")


@dataclass(frozen=True)
class Exchange:
    path: str
    body: dict[str, Any]
    status: int


class Relay(StopsOnExit):
    """Serves on 127.0.0.1 and passes every request on to ``target``; ``url`` stands in
    for the target's. A streamed answer is passed on whole, once it is complete."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.exchanges: list[Exchange] = []
        self._served: ServedApp = serve_in_thread(
            Starlette(routes=[Route("/{path:path}", self._pass_on, methods=["GET", "POST"])])
        )
        self.url = self._served.url

    async def _pass_on(self, request: Request) -> Response:
        raw = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() in PASSED_ON}
        path = request.url.path
        async with httpx.AsyncClient(timeout=300) as client:
            answer = await client.request(
                request.method, self.target + path, content=raw, headers=headers
            )
        self.exchanges.append(Exchange(path, json.loads(raw) if raw else {}, answer.status_code))
        return Response(
            answer.content,
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
        )

    def stop(self) -> None:
        self._served.stop()
