"""A strict fake of the Slack Web API, for tests, plus builders of signed Events API requests.

It is reached by the real `slack_sdk` client over real HTTP and answers like Slack does (HTTP 200
with `{"ok": false, "error": ...}` for API errors, 429 + Retry-After when rate limited):

    slack = FakeSlack(bot_token="xoxb-test", bot_user_id="UBOT", team_id="T1")
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    await client.chat_postMessage(channel="C1", text="hi")
    assert slack.messages("C1")[0]["text"] == "hi"
    slack.stop()

A method takes only the arguments Slack publishes for it (the table in tests.fakes.slack_spec,
from Slack's OpenAPI spec at slackapi/slack-api-specs bc08db4, v1.7.0, and its method reference):
another is answered `invalid_arguments`, its name in the `[ERROR]` message (the fake's words).

State you can set: `slack.known_channels` (a set; empty = every channel exists),
`slack.channel_names` ({"C1": "support"}), `slack.users` ({"U1": {"real_name": "Ann"}}),
`slack.latency` (seconds before every answer). Scripted trouble: `fail_next(method, error)`,
`rate_limit_next(method, retry_after)`, `hang_next(method, seconds, channel=, after=)` (a
request held open, before or after it is handled; `held` lists those). What happened:
`calls`, `calls_to(method)`, `messages(channel)`, `thread(channel, ts)`,
`reactions(channel, ts)`, `ephemeral_messages`, `assistant_status`, `suggested_prompts`,
`thread_titles`, `streams(channel)` (Slack's streaming methods: see tests.fakes.slack_streams,
and `refuse_stream_after` to have streams expire). Files people attached:
`add_file(name, content, mimetype)` gives the file object for an event's `files`, served at
its `url_private` to the bot token only (anyone else is redirected to a sign-in page, as
Slack does), and by `files.info`; `file_downloads` lists the requests for them. Files the
bot uploads (files_upload_v2: tests.fakes.slack_uploads) are in `uploaded_files`.

The server runs in its own thread (see tests.fakes.serve), so all state is behind a lock and the
accessors return copies.

The methods are in tests/fakes/slack_methods.py (and slack_streams.py, slack_files.py,
slack_uploads.py), the
checks of a message's content in slack_content.py, the reading of a request and Slack's error
answer in slack_requests.py. The request builders (`event_payload`, `signed_headers`,
`block_actions_payload`, `url_verification_payload`, from slack_payloads.py) make what Slack
sends to the bot's own HTTP endpoint.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread
from tests.fakes.slack_content import MAX_TEXT
from tests.fakes.slack_files import FileMethods
from tests.fakes.slack_methods import WebMethods, ts_key
from tests.fakes.slack_payloads import (
    block_actions_payload,
    event_payload,
    signed_headers,
    url_verification_payload,
)
from tests.fakes.slack_requests import SlackError, read_request
from tests.fakes.slack_spec import unknown_arguments
from tests.fakes.slack_streams import StreamMethods
from tests.fakes.slack_trouble import ScriptedTrouble
from tests.fakes.slack_uploads import UploadMethods

__all__ = [
    "MAX_TEXT",
    "Call",
    "FakeSlack",
    "block_actions_payload",
    "event_payload",
    "signed_headers",
    "url_verification_payload",
]


@dataclass
class Call:
    """One request the fake answered, in arrival order."""

    method: str
    args: dict[str, Any]
    token: str | None
    status: int
    response: dict[str, Any]
    #: when it was answered (time.monotonic)
    at: float = field(default_factory=time.monotonic)

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        return self.response.get("error")

    def __str__(self) -> str:
        outcome = "ok" if self.ok else f"error={self.error}"
        args = json.dumps(self.args, ensure_ascii=False, default=str)
        if len(args) > 300:
            args = args[:300] + "..."
        return f"{self.method} [{self.status} {outcome}] {args}"


_Handler = Callable[[dict[str, Any]], dict[str, Any]]


class FakeSlack(
    WebMethods, FileMethods, StreamMethods, UploadMethods, ScriptedTrouble, StopsOnExit
):
    """The fake Slack Web API, serving on 127.0.0.1 from the moment it is created."""

    def __init__(
        self,
        bot_token: str = "xoxb-test",
        bot_user_id: str = "UBOT",
        team_id: str = "T1",
        *,
        bot_id: str = "BBOT",
        team_name: str = "Test Team",
        app_id: str = "A1",
    ):
        self.bot_token = bot_token
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.team_id = team_id
        self.team_name = team_name
        self.app_id = app_id

        self.latency = 0.0
        self.known_channels: set[str] = set()
        self.channel_names: dict[str, str] = {}
        self.users: dict[str, dict[str, Any]] = {}

        self._lock = threading.RLock()
        self._calls: list[Call] = []
        self._scripted: dict[str, deque[tuple[str, Any]]] = defaultdict(deque)
        self._messages: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._ephemeral: list[dict[str, Any]] = []
        self._reactions: dict[tuple[str, str], list[str]] = defaultdict(list)
        self._status: dict[tuple[str, str], str] = {}
        self._prompts: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._titles: dict[tuple[str, str], str] = {}
        self._ts_counter = 0
        #: files people attached: (Slack's file object, its bytes) by id
        self._files: dict[str, tuple[dict[str, Any], bytes]] = {}
        self._downloads: list[dict[str, Any]] = []
        #: files the bot uploads, by id; the upload URLs not used yet (key: file id)
        self._uploads: dict[str, dict[str, Any]] = {}
        self._upload_urls: dict[str, str] = {}
        #: scripted hangs by method: [channel or None, seconds, after, times left]
        self._hangs: dict[str, list[list[Any]]] = defaultdict(list)
        #: (method, channel) of each request held open so far
        self.held: list[tuple[str, str | None]] = []
        self._stopping = threading.Event()

        self._handlers: dict[str, _Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "conversations.info": self._conversations_info,
            "conversations.history": self._conversations_history,
            "conversations.replies": self._conversations_replies,
            "users.info": self._users_info,
            "files.info": self._files_info,
            "files.getUploadURLExternal": self._get_upload_url,
            "files.completeUploadExternal": self._complete_upload,
            "assistant.threads.setStatus": self._set_status,
            "assistant.threads.setSuggestedPrompts": self._set_suggested_prompts,
            "assistant.threads.setTitle": self._set_title,
        }
        self.app = Starlette(
            routes=[
                Route("/api/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/files-pri/{file_id}/{name}", self._serve_file, methods=["GET"]),
                Route("/signin", self._sign_in, methods=["GET"]),
                Route("/upload/v1/{key}", self._receive_upload, methods=["POST"]),
            ]
        )
        self._served: ServedApp = serve_in_thread(self.app)
        self.url = self._served.url
        self.api_url = self.url + "/api/"

    # ---------------------------------------------------------------------------------------
    # Lifecycle

    def stop(self) -> None:
        self._stopping.set()
        self._served.stop()

    def __repr__(self) -> str:
        return f"FakeSlack({self.api_url!r}, calls={len(self._calls)})"

    # ---------------------------------------------------------------------------------------
    # What happened

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [call for call in self._calls if call.method == method]

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    def messages(self, channel: str) -> list[dict[str, Any]]:
        """Messages now in `channel` (top level and replies), oldest first."""
        with self._lock:
            found = sorted(self._messages.get(channel, []), key=lambda m: ts_key(m["ts"]))
            return [self._public(channel, m) for m in found]

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The parent message (if known) and the replies of a thread, oldest first."""
        return [
            m
            for m in self.messages(channel)
            if m["ts"] == thread_ts or m.get("thread_ts") == thread_ts
        ]

    def reactions(self, channel: str, ts: str) -> list[str]:
        """Names of the reactions the bot has on a message (any message, even one not seen)."""
        with self._lock:
            return list(self._reactions.get((channel, ts), []))

    @property
    def ephemeral_messages(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(m) for m in self._ephemeral]

    @property
    def assistant_status(self) -> dict[tuple[str, str], str]:
        """The latest assistant.threads.setStatus per (channel_id, thread_ts)."""
        with self._lock:
            return dict(self._status)

    @property
    def suggested_prompts(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        with self._lock:
            return {key: list(value) for key, value in self._prompts.items()}

    @property
    def thread_titles(self) -> dict[tuple[str, str], str]:
        with self._lock:
            return dict(self._titles)

    def add_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U1",
        ts: str | None = None,
        thread_ts: str | None = None,
        **fields: Any,
    ) -> str:
        """Put a message from someone else into a channel (the bot cannot update/delete it);
        ``fields``: more of Slack's (``bot_id``, ``files``, ``subtype``)."""
        with self._lock:
            ts = ts or self._next_ts()
            message = {"type": "message", "ts": ts, "text": text, "user": user}
            self._messages[channel].append({**message, "thread_ts": thread_ts, **fields})
            return ts

    async def wait_for(
        self,
        predicate: Callable[[FakeSlack], bool],
        timeout: float = 5.0,  # noqa: ASYNC109 - a polling deadline that reports, not a cancel
        interval: float = 0.01,
    ) -> None:
        """Poll until `predicate(self)` is true; AssertionError with a dump of calls if not."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(self._timeout_report(timeout))
            await asyncio.sleep(interval)

    def remove_message(self, channel: str, ts: str) -> None:
        """Someone deleted their message (the event is the test's to send)."""
        with self._lock:
            self._messages[channel] = [m for m in self._messages[channel] if m["ts"] != ts]

    def edit_message(self, channel: str, ts: str, text: str) -> None:
        """Someone edited their message (the event is the test's to send)."""
        with self._lock:
            for message in self._messages[channel]:
                if message["ts"] == ts:
                    message["text"] = text

    def wait_for_sync(
        self,
        predicate: Callable[[FakeSlack], bool],
        timeout: float = 5.0,
        interval: float = 0.01,
    ) -> None:
        """Blocking form of wait_for, for non-async tests."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(self._timeout_report(timeout))
            time.sleep(interval)

    def _timeout_report(self, timeout: float) -> str:
        calls = self.calls
        lines = [f"FakeSlack: condition not met within {timeout}s. {len(calls)} call(s):"]
        lines += [f"  {i}. {call}" for i, call in enumerate(calls, 1)]
        with self._lock:
            for channel, messages in self._messages.items():
                lines.append(f"  messages in {channel}:")
                lines += [f"    {m['ts']} {m.get('text', '')[:200]!r}" for m in messages]
        return "\n".join(lines)

    # ---------------------------------------------------------------------------------------
    # HTTP

    async def _endpoint(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        token, args, parse_error = await read_request(request)
        headers: dict[str, str] = {}
        status = 200
        hang = self._take_hang(method, args) if not parse_error else None
        if hang is not None and not hang[1]:
            await self._hold(hang[0])
            if await request.is_disconnected():  # the caller gave up (or died): not done
                return JSONResponse({"ok": False, "error": "request_timeout"}, status_code=408)
        with self._lock:
            try:
                if parse_error:
                    raise SlackError(parse_error)
                handler = self._handlers.get(method)
                if handler is None:
                    raise SlackError("unknown_method")
                scripted = self._scripted[method].popleft() if self._scripted[method] else None
                if scripted and scripted[0] == "rate_limit":
                    status = 429
                    headers["Retry-After"] = str(scripted[1])
                    raise SlackError("ratelimited")
                if scripted:
                    raise SlackError(str(scripted[1]))
                if not token:
                    raise SlackError("not_authed")
                if token != self.bot_token:
                    raise SlackError("invalid_auth")
                unknown = unknown_arguments(method, set(args))
                if unknown:  # as Slack answers an argument its method does not take
                    raise SlackError(
                        "invalid_arguments",
                        *(f"unsupported argument: {a} [json-pointer:/{a}]" for a in unknown),
                    )
                body = {"ok": True, **handler(args)}
            except SlackError as exc:
                body = exc.body()
            self._calls.append(Call(method, args, token, status, body))
        if hang is not None and hang[1]:
            await self._hold(hang[0])
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        return JSONResponse(body, status_code=status, headers=headers)
