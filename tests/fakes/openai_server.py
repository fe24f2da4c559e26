"""A strict fake of the OpenAI HTTP API (Chat Completions and Responses), for tests.

It is reached by the real `openai` client over real HTTP, validates requests the way the real API
does (answering 400 with the real error texts) and against the `openai` package's request
types, version 3.57.0 (tests/fakes/openai_types.py), and answers with scripted steps, built
through that package's reply models (a Raw step is sent as given):

    fake = FakeOpenAI(api_key="test-key")
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test-key")
    fake.script(Reply(tool_calls=[ToolUse("now", {})]), Reply(text="It is noon."))
    ...
    assert fake.requests[1].api == "chat"
    fake.stop()

Steps are consumed one per *accepted* request: a request the fake rejects (401/400/404) does not
consume a step. A step is a Reply, a Fail, a Hang, a Raw (a 200 whose body is given verbatim:
what a broken server sends), a plain str (short for Reply(text=...)), a ToolUse (short for
Reply(tool_calls=[...])), or a callable `Request -> step` (sync or async; one returning None
means "no reply", like an empty queue). When the queue is empty, `fake.responder` is asked;
without one the fake answers 500 "fake: no scripted reply".

A Reply with `reasoning` text makes a reasoning model (gpt-5, o-series) start its Responses
output with a reasoning item; tests/fakes/openai_reasoning.py holds the rules the real API
enforces for those items on the way back.

`fake.apis` (default {"chat", "responses"}) are the endpoints served: take one out and its path
answers 404 `{"detail": "Not Found"}`, as a server without that API does (vLLM, LiteLLM).

Diagnostics that point at a mistake in the test rather than in the code under test (no scripted
reply, tool calls scripted while tools are disabled, ...) are 500s whose message starts with
"fake:" and which carry `x-should-retry: false`, so the client does not retry them.

The steps and recorded requests are in tests/fakes/openai_steps.py, the checks of a request in
openai_checks.py (both endpoints), openai_chat_checks.py and openai_responses_checks.py, the
error answers in openai_errors.py and the answers built from a Reply in openai_replies.py.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, StreamingResponse
from starlette.responses import Response as HttpResponse
from starlette.routing import Route

from tests.fakes.openai_chat_checks import validate_chat
from tests.fakes.openai_checks import validate_model, validate_sampling
from tests.fakes.openai_errors import (
    ApiError,
    fail_to_error,
    fake_error,
)
from tests.fakes.openai_reasoning import Reasoning
from tests.fakes.openai_replies import (
    Answer,
    chat_chunks,
    chat_completion,
    response_events,
    response_object,
    sse,
)
from tests.fakes.openai_responses_checks import (
    check_function_call_pairs,
    validate_responses_input,
    validate_responses_tools,
)
from tests.fakes.openai_steps import Fail, Hang, Raw, Reply, Request, Step, ToolUse, check_step
from tests.fakes.openai_types import Response, check_request, sent
from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread

__all__ = ["Fail", "FakeOpenAI", "Hang", "Raw", "Reply", "Request", "ToolUse"]


def _mask_key(key: str) -> str:
    if len(key) <= 8:
        return key
    return key[:3] + "*" * (len(key) - 7) + key[-4:]


class FakeOpenAI(StopsOnExit):
    """A strict fake OpenAI server on 127.0.0.1; starts serving on construction."""

    def __init__(self, api_key: str = "test-key", host: str = "127.0.0.1"):
        self.api_key = api_key
        self.responder: Callable[[Request], Any] | None = None
        self.latency: float = 0.0
        #: seconds between the frames of a streamed answer (a model that writes slowly)
        self.frame_interval: float = 0.0
        self.requests: list[Request] = []
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._stored: dict[str, list[dict[str, Any]]] = {}
        self._reasoning = Reasoning()
        #: the endpoints served; another answers 404 as a server without that API does
        self.apis: set[str] = {"chat", "responses"}
        app = Starlette(
            routes=[
                Route(
                    "/{path:path}",
                    self._handle,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                )
            ]
        )
        self._served: ServedApp = serve_in_thread(app, host=host)
        self.url = self._served.url
        self.base_url = f"{self.url}/v1"

    # ---- test-facing API

    def script(self, *steps: Step) -> FakeOpenAI:
        """Queue steps; each accepted request consumes one."""
        for step in steps:
            check_step(step)
        with self._lock:
            self._queue.extend(steps)
        return self

    @property
    def pending(self) -> int:
        """How many scripted steps have not been consumed yet."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self._stored.clear()
        self._reasoning.clear()
        self.responder = None
        self.latency = self.frame_interval = 0.0
        self.apis = {"chat", "responses"}

    def stop(self) -> None:
        self._stopping.set()
        self._served.stop()

    def __repr__(self) -> str:
        return f"FakeOpenAI({self.base_url!r}, pending={self.pending})"

    # ---- serving

    async def _handle(self, http: HttpRequest) -> HttpResponse:
        raw = await http.body()
        record = Request(
            path=http.url.path,
            body={},
            headers={k.lower(): v for k, v in http.headers.items()},
            method=http.method,
        )
        parsed: Any = None
        parse_failed = False
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parse_failed = True
        if isinstance(parsed, dict):
            record.body = parsed
        elif parsed is not None:
            parse_failed = True
        with self._lock:
            self.requests.append(record)
        try:
            return await self._answer(http, record, raw, parse_failed)
        except ApiError as err:
            return self._error(record, err)
        except Exception as exc:
            return self._error(record, fake_error(f"fake: internal error: {exc!r}"))

    def _error(self, record: Request, err: ApiError) -> JSONResponse:
        record.status = err.status
        record.error = err.message
        body = {
            "error": {
                "message": err.message,
                "type": err.type,
                "param": err.param,
                "code": err.code,
            }
        }
        headers = {"x-request-id": f"req_{secrets.token_hex(16)}", **err.headers}
        return JSONResponse(body, status_code=err.status, headers=headers)

    def _check_auth(self, headers: dict[str, str]) -> None:
        auth = headers.get("authorization")
        if not auth:
            raise ApiError(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), "
                "or as the password field (with blank username) if you're accessing the API "
                "from your browser and are prompted for a username. You can obtain an API key "
                "from https://platform.openai.com/account/api-keys.",
            )
        scheme, _, key = auth.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or key != self.api_key:
            raise ApiError(
                401,
                f"Incorrect API key provided: {_mask_key(key or auth)}. You can find your API "
                "key at https://platform.openai.com/account/api-keys.",
                code="invalid_api_key",
            )

    async def _answer(
        self, http: HttpRequest, record: Request, raw: bytes, parse_failed: bool
    ) -> HttpResponse:
        if record.api in ("chat", "responses") and record.api not in self.apis:
            record.status = 404
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        self._check_auth(record.headers)
        if http.method != "POST" or record.api == "other":
            raise ApiError(404, f"Invalid URL ({http.method} {record.path})")
        if parse_failed or not raw:
            raise ApiError(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you "
                "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
                "but what was sent was not valid JSON. If you have trouble figuring out how to "
                "fix this, please contact us through our help center at help.openai.com.)",
            )
        body = record.body
        history: list[dict[str, Any]] = []
        if record.api == "chat":
            validate_chat(body)
        else:
            history = self._validate_responses(body)
        validate_sampling(body, record.api)
        check_request(record.api, body)  # what the checks above do not cover, by the types

        step = await self._next_step(record)
        if isinstance(step, Hang):
            await self._sleep(step.seconds)
            raise ApiError(
                500,
                f"fake: Hang({step.seconds}) elapsed without the client giving up.",
                type="server_error",
            )
        if isinstance(step, Fail):
            await self._sleep(self.latency)
            raise fail_to_error(step, record.api)
        if isinstance(step, Raw):
            await self._sleep(self.latency)
            return self._raw(record, step)

        reply: Reply = step
        self._check_reply_fits(body, reply)
        await self._sleep(self.latency)
        answer = Answer(reply, raw)
        headers = {"x-request-id": f"req_{secrets.token_hex(16)}", "openai-processing-ms": "1"}
        record.status = 200

        if record.api == "chat":
            if body.get("stream"):
                chunks = chat_chunks(body, answer)
                frames = [sse(c) for c in chunks] + [b"data: [DONE]\n\n"]
                return self._stream(frames, headers)
            return JSONResponse(chat_completion(body, answer), headers=headers)

        response = response_object(body, answer)
        if reply.reasoning:
            response["output"] = self._reasoning.think(body, response["output"])
        response = sent(Response, response)
        if body.get("store", True) is not False:
            with self._lock:
                self._stored[response["id"]] = history + response["output"]
        if body.get("stream"):
            frames = [sse(e, e["type"]) for e in response_events(response)]
            return self._stream(frames, headers)
        return JSONResponse(response, headers=headers)

    def _validate_responses(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        validate_model(body)
        previous: list[dict[str, Any]] = []
        prev_id = body.get("previous_response_id")
        if prev_id is not None:
            with self._lock:
                stored = self._stored.get(prev_id)
            if stored is None:
                raise ApiError(
                    400,
                    f"Previous response with id '{prev_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            previous = list(stored)
        items = validate_responses_input(body)
        self._reasoning.check_include(body)
        self._reasoning.check_input(body, items)
        validate_responses_tools(body)
        history = previous + items
        check_function_call_pairs(history)
        return history

    def _raw(self, record: Request, step: Raw) -> HttpResponse:
        record.status = 200
        headers = {"x-request-id": f"req_{secrets.token_hex(16)}"}
        if not record.stream:
            return JSONResponse(step.body, headers=headers)
        frames = [
            f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in step.events
        ]
        if record.api == "chat":
            frames.append(b"data: [DONE]\n\n")
        return self._stream(frames, headers)

    def _stream(self, frames: list[bytes], headers: dict[str, str]) -> StreamingResponse:
        pause = self.frame_interval

        async def gen() -> AsyncIterator[bytes]:
            for number, frame in enumerate(frames):
                if number and pause:
                    await asyncio.sleep(pause)
                yield frame

        return StreamingResponse(gen(), media_type="text/event-stream", headers=headers)

    async def _next_step(self, record: Request) -> Reply | Fail | Hang | Raw:
        with self._lock:
            step: Any = self._queue.popleft() if self._queue else None
        if step is None and self.responder is not None:
            step = self.responder
        for _ in range(10):
            if step is None:
                raise fake_error("fake: no scripted reply")
            if isinstance(step, Reply | Fail | Hang | Raw):
                return step
            if isinstance(step, str):
                return Reply(text=step)
            if isinstance(step, ToolUse):
                return Reply(tool_calls=[step])
            if callable(step):
                step = step(record)
                if inspect.isawaitable(step):
                    step = await step
                continue
            raise fake_error(f"fake: not a step: {step!r}")
        raise fake_error("fake: step callables nested too deeply")

    @staticmethod
    def _check_reply_fits(body: dict[str, Any], reply: Reply) -> None:
        if not reply.tool_calls:
            return
        tools = body.get("tools") or []
        if not tools or body.get("tool_choice") == "none":
            raise fake_error("fake: scripted tool call but tools are disabled")
        if len(reply.tool_calls) > 1 and body.get("parallel_tool_calls") is False:
            raise fake_error(
                f"fake: scripted {len(reply.tool_calls)} tool calls but parallel_tool_calls "
                "is false"
            )

    async def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + max(0.0, seconds)
        while not self._stopping.is_set():
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(min(remaining, 0.05))
