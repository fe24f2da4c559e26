"""A strict fake of the Slack Web API, for tests, plus builders of signed Events API requests.

It is reached by the real `slack_sdk` client over real HTTP and answers like Slack does (HTTP 200
with `{"ok": false, "error": ...}` for API errors, 429 + Retry-After when rate limited):

    slack = FakeSlack(bot_token="xoxb-test", bot_user_id="UBOT", team_id="T1")
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    await client.chat_postMessage(channel="C1", text="hi")
    assert slack.messages("C1")[0]["text"] == "hi"
    slack.stop()

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
Slack does), and by `files.info`; `file_downloads` lists the requests for them.

The server runs in its own thread (see tests.fakes.serve), so all state is behind a lock and the
accessors return copies.

The request builders at the bottom (`event_payload`, `signed_headers`, `block_actions_payload`,
`url_verification_payload`) make what Slack sends to the bot's own HTTP endpoint.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread
from tests.fakes.slack_streams import StreamError, StreamMethods

__all__ = [
    "Call",
    "FakeSlack",
    "block_actions_payload",
    "event_payload",
    "signed_headers",
    "url_verification_payload",
]

MAX_TEXT = 40_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3_000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2_000
MAX_HEADER_TEXT = 150
MAX_MARKDOWN_TEXT = 12_000
_FILE_CHUNK = 256 * 1024

FIRST_TS_SECONDS = 1_700_000_000

# Arguments the SDK may send as JSON text inside a form-encoded body.
_JSON_ARGS = ("blocks", "attachments", "prompts", "metadata", "chunks", "unfurl_media")


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


class _SlackError(Exception):
    def __init__(self, error: str, *details: str):
        super().__init__(error)
        self.error = error
        self.details = details

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": False, "error": self.error}
        if self.details:
            body["response_metadata"] = {"messages": [f"[ERROR] {d}" for d in self.details]}
        return body


_Handler = Callable[[dict[str, Any]], dict[str, Any]]


class FakeSlack(StreamMethods, StopsOnExit):
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
            "assistant.threads.setStatus": self._set_status,
            "assistant.threads.setSuggestedPrompts": self._set_suggested_prompts,
            "assistant.threads.setTitle": self._set_title,
        }
        self.app = Starlette(
            routes=[
                Route("/api/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/files-pri/{file_id}/{name}", self._serve_file, methods=["GET"]),
                Route("/signin", self._sign_in, methods=["GET"]),
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
            found = sorted(self._messages.get(channel, []), key=lambda m: _ts_key(m["ts"]))
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

    def remove_message(self, channel: str, ts: str) -> None:
        """Someone deleted their message (the event is the test's to send)."""
        with self._lock:
            self._messages[channel] = [m for m in self._messages[channel] if m["ts"] != ts]

    def add_file(
        self,
        name: str,
        content: bytes,
        mimetype: str,
        *,
        filetype: str = "",
        size: int | None = None,
        check_file_info: bool = False,
    ) -> dict[str, Any]:
        """A file someone attached, as Slack's file object in their message's ``files``:
        served at its ``url_private`` to the bot token only. ``size``: what Slack says
        (default: the real size); ``check_file_info``: without its URLs, as Slack Connect
        sends it (files.info tells them)."""
        with self._lock:
            file_id = f"F{len(self._files) + 1:08d}"
            url = f"{self.url}/files-pri/{file_id}/{name}"
            file = {
                "id": file_id,
                "name": name,
                "title": name,
                "mimetype": mimetype,
                "filetype": filetype,
                "size": len(content) if size is None else size,
                "mode": "hosted",
                "file_access": "visible",
                "url_private": url,
                "url_private_download": url + "?download=1",
            }
            self._files[file_id] = (file, content)
        if check_file_info:
            hidden = ("url_private", "url_private_download")
            return {
                **{k: v for k, v in file.items() if k not in hidden},
                "file_access": "check_file_info",
            }
        return dict(file)

    @property
    def file_downloads(self) -> list[dict[str, Any]]:
        """Each request for a file's bytes: its ``id``, whether it was ``authorized`` and
        how many bytes were ``served`` before the reader stopped."""
        with self._lock:
            return [dict(d) for d in self._downloads]

    async def _serve_file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        auth = request.headers.get("authorization", "")
        with self._lock:
            found = self._files.get(file_id)
            download = {"id": file_id, "authorized": auth == f"Bearer {self.bot_token}"}
            download["served"] = 0
            self._downloads.append(download)
        if found is None or request.path_params["name"] != found[0]["name"]:
            return PlainTextResponse("Not found", status_code=404)
        if not download["authorized"]:  # as Slack does: off to the sign-in page
            return RedirectResponse(f"{self.url}/signin?redir=/files-pri/{file_id}", 302)
        content = found[1]

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(content), _FILE_CHUNK):
                if await request.is_disconnected():  # the reader stopped: so does Slack
                    return
                piece = content[start : start + _FILE_CHUNK]
                with self._lock:
                    download["served"] += len(piece)
                yield piece

        media = found[0]["mimetype"]
        length = {"Content-Length": str(len(content))}
        return StreamingResponse(chunks(), media_type=media, headers=length)

    async def _sign_in(self, request: Request) -> Response:
        return HTMLResponse("<html><body>Sign in to Slack</body></html>")

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
    # Scripted trouble

    def fail_next(self, method: str, error: str = "internal_error", times: int = 1) -> None:
        """The next `times` calls to `method` answer {"ok": false, "error": error}."""
        with self._lock:
            self._scripted[method].extend([("fail", error)] * times)

    def rate_limit_next(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        """The next `times` calls to `method` answer HTTP 429 with `Retry-After: retry_after`."""
        with self._lock:
            self._scripted[method].extend([("rate_limit", retry_after)] * times)

    def hang_next(
        self,
        method: str,
        seconds: float,
        *,
        channel: str | None = None,
        after: bool = False,
        times: int = 1,
    ) -> None:
        """Hold the next `times` calls to `method` (in `channel`, if given) open for
        `seconds`: before they are handled, or with `after=True` once they are (a post is in
        the channel, its answer is late). Each one held is added to `held`."""
        with self._lock:
            self._hangs[method].append([channel, seconds, after, times])

    def _take_hang(self, method: str, args: dict[str, Any]) -> tuple[float, bool] | None:
        channel = args.get("channel") or args.get("channel_id")
        with self._lock:
            for hang in self._hangs[method]:
                if hang[0] in (None, channel) and hang[3] > 0:
                    hang[3] -= 1
                    self.held.append((method, channel))
                    return hang[1], hang[2]
        return None

    async def _hold(self, seconds: float) -> None:
        # a thread waits, so stop() ends the hang at once
        await asyncio.to_thread(self._stopping.wait, seconds)

    # ---------------------------------------------------------------------------------------
    # HTTP

    async def _endpoint(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        token, args, parse_error = await _read_request(request)
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
                    raise _SlackError(parse_error)
                handler = self._handlers.get(method)
                if handler is None:
                    raise _SlackError("unknown_method")
                scripted = self._scripted[method].popleft() if self._scripted[method] else None
                if scripted and scripted[0] == "rate_limit":
                    status = 429
                    headers["Retry-After"] = str(scripted[1])
                    raise _SlackError("ratelimited")
                if scripted:
                    raise _SlackError(str(scripted[1]))
                if not token:
                    raise _SlackError("not_authed")
                if token != self.bot_token:
                    raise _SlackError("invalid_auth")
                try:
                    body = {"ok": True, **handler(args)}
                except StreamError as exc:
                    raise _SlackError(exc.error, *filter(None, [exc.detail])) from None
            except _SlackError as exc:
                body = exc.body()
            self._calls.append(Call(method, args, token, status, body))
        if hang is not None and hang[1]:
            await self._hold(hang[0])
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        return JSONResponse(body, status_code=status, headers=headers)

    # ---------------------------------------------------------------------------------------
    # Helpers (called with the lock held)

    def _next_ts(self) -> str:
        self._ts_counter += 1
        micros = self._ts_counter * 100
        return f"{FIRST_TS_SECONDS + micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _channel_exists(self, channel: str) -> bool:
        return not self.known_channels or channel in self.known_channels

    def _require_channel(self, args: dict[str, Any], key: str = "channel") -> str:
        channel = args.get(key)
        if not channel or not isinstance(channel, str) or not self._channel_exists(channel):
            raise _SlackError("channel_not_found")
        return channel

    def _find(self, channel: str, ts: Any) -> dict[str, Any]:
        for message in self._messages.get(channel, []):
            if message["ts"] == ts:
                return message
        raise _SlackError("message_not_found")

    def _public(self, channel: str, message: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in message.items() if not k.startswith("_")}
        out["channel"] = channel
        out["reactions"] = list(self._reactions.get((channel, message["ts"]), []))
        return out

    def _bot_message(self, args: dict[str, Any], ts: str) -> dict[str, Any]:
        return {
            "type": "message",
            "ts": ts,
            "text": args.get("text", ""),
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "team": self.team_id,
            "thread_ts": args.get("thread_ts") or None,
            "blocks": args.get("blocks"),
            "metadata": args.get("metadata"),
        }

    def _message_response(self, message: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in message.items() if v is not None and not k.startswith("_")}

    # ---------------------------------------------------------------------------------------
    # Methods

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake-workspace.slack.com/",
            "team": self.team_name,
            "user": "bot",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _check_blocks_and_metadata(self, args: dict[str, Any]) -> None:
        if "blocks" in args:
            _check_blocks(args["blocks"])
        _check_metadata(args)

    def _new_message(self, channel: str, args: dict[str, Any]) -> dict[str, Any]:
        message = self._bot_message(args, self._next_ts())
        self._messages[channel].append(message)
        return message

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        _check_content(args, required=True)
        _check_metadata(args)
        message = self._new_message(channel, args)
        return {"channel": channel, "ts": message["ts"], "message": self._message_response(message)}

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        message = self._find(channel, args.get("ts"))
        if message.get("user") != self.bot_user_id:
            raise _SlackError("cant_update_message")
        if message.get("_streaming"):
            raise _SlackError("cant_update_message", "the message is still streaming")
        _check_content(args, required=True)
        _check_metadata(args)
        if "text" in args:
            message["text"] = args["text"]
        if "blocks" in args:
            message["blocks"] = args["blocks"]
        if "metadata" in args:
            message["metadata"] = args["metadata"]
        message["edited"] = {"user": self.bot_user_id, "ts": self._next_ts()}
        return {
            "channel": channel,
            "ts": message["ts"],
            "text": message["text"],
            "message": self._message_response(message),
        }

    def _delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        message = self._find(channel, args.get("ts"))
        if message.get("user") != self.bot_user_id:
            raise _SlackError("cant_delete_message")
        self._messages[channel].remove(message)
        return {"channel": channel, "ts": message["ts"]}

    def _post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        user = args.get("user")
        if not user or not isinstance(user, str):
            raise _SlackError("user_not_in_channel")
        _check_content(args, required=True)
        ts = self._next_ts()
        self._ephemeral.append(
            {
                "channel": channel,
                "user": user,
                "ts": ts,
                "text": args.get("text", ""),
                "blocks": args.get("blocks"),
                "thread_ts": args.get("thread_ts") or None,
            }
        )
        return {"message_ts": ts}

    def _reaction_target(self, args: dict[str, Any]) -> tuple[tuple[str, str], str]:
        if not args.get("channel") or not args.get("timestamp"):
            raise _SlackError("no_item_specified")
        channel = self._require_channel(args)
        name = args.get("name")
        if not name or not isinstance(name, str) or ":" in name or " " in name:
            raise _SlackError("invalid_name")
        return (channel, str(args["timestamp"])), name

    def _reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        key, name = self._reaction_target(args)
        if name in self._reactions[key]:
            raise _SlackError("already_reacted")
        self._reactions[key].append(name)
        return {}

    def _reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        key, name = self._reaction_target(args)
        if name not in self._reactions.get(key, []):
            raise _SlackError("no_reaction")
        self._reactions[key].remove(name)
        return {}

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        if not channel or not isinstance(channel, str):
            raise _SlackError("channel_not_found")
        if not self._channel_exists(channel) and channel not in self.channel_names:
            raise _SlackError("channel_not_found")
        is_im = channel.startswith("D")
        info: dict[str, Any] = {
            "id": channel,
            "created": FIRST_TS_SECONDS - 86_400,
            "is_channel": channel.startswith("C"),
            "is_group": channel.startswith("G"),
            "is_im": is_im,
            "is_mpim": False,
            "is_private": not channel.startswith("C"),
            "is_archived": False,
            "is_general": False,
            "is_member": True,
            "context_team_id": self.team_id,
        }
        if is_im:
            info["user"] = "U1"
        else:
            name = self.channel_names.get(channel, "general")
            info.update(
                {
                    "name": name,
                    "name_normalized": name,
                    "is_general": name == "general",
                    "topic": {"value": "", "creator": "", "last_set": 0},
                    "purpose": {"value": "", "creator": "", "last_set": 0},
                }
            )
        return {"channel": info}

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages (thread parents included), newest first; after ``oldest``."""
        _known_args(args, _HISTORY_ARGS)
        channel = self._require_channel(args)
        oldest = _ts_key(str(args.get("oldest") or "0"))
        found = [
            m
            for m in self._messages.get(channel, [])
            if m["thread_ts"] in (None, m["ts"]) and _ts_key(m["ts"]) > oldest
        ]
        found.sort(key=lambda m: _ts_key(m["ts"]), reverse=True)
        return self._listing(found, args, default_limit=100, max_limit=999)

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent (if the fake has seen it) and its replies, oldest first."""
        _known_args(args, _REPLIES_ARGS)
        channel = self._require_channel(args)
        ts = args.get("ts")
        if not ts or not isinstance(ts, str):
            raise _SlackError("invalid_arguments", "missing required field: ts")
        found = [m for m in self._messages.get(channel, []) if ts in (m["ts"], m["thread_ts"])]
        if not found:
            raise _SlackError("thread_not_found")
        found.sort(key=lambda m: _ts_key(m["ts"]))
        return self._listing(found, args, default_limit=1000, max_limit=1000)

    def _listing(
        self,
        messages: list[dict[str, Any]],
        args: dict[str, Any],
        *,
        default_limit: int,
        max_limit: int,
    ) -> dict[str, Any]:
        """One page of ``messages`` as conversations.* lists them: by ``limit`` and
        ``cursor``, with metadata only when ``include_all_metadata`` is set."""
        try:
            limit = int(args.get("limit") or default_limit)
        except (TypeError, ValueError):
            limit = 0
        if limit < 1:
            raise _SlackError("invalid_limit")
        start = _cursor_offset(args.get("cursor"))
        page = messages[start : start + min(limit, max_limit)]
        with_metadata = _flag(args.get("include_all_metadata"))
        listed = []
        for message in page:
            shown = self._message_response(message)
            if not with_metadata:
                shown.pop("metadata", None)
            listed.append(shown)
        more = start + len(page) < len(messages)
        next_cursor = _cursor(start + len(page)) if more else ""
        return {
            "messages": listed,
            "has_more": more,
            "response_metadata": {"next_cursor": next_cursor},
        }

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        _known_args(args, {"user", "include_locale"})
        user = args.get("user")
        if not user or not isinstance(user, str) or user[0] not in "UWB":
            raise _SlackError("user_not_found")
        is_bot = user == self.bot_user_id
        name = "bot" if is_bot else user.lower()
        real_name = "Bot" if is_bot else f"User {user}"
        info: dict[str, Any] = {
            "id": user,
            "team_id": self.team_id,
            "name": name,
            "real_name": real_name,
            "deleted": False,
            "is_bot": is_bot,
            "is_admin": False,
            "tz": "Europe/London",
            "tz_offset": 0,
        }
        info.update(self.users.get(user, {}))
        info["profile"] = {
            "real_name": info["real_name"],
            "display_name": info.get("display_name", info["name"]),
            "email": info.get("email", f"{info['name']}@example.com"),
            **info.get("profile", {}),
        }
        return {"user": info}

    def _files_info(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._files.get(str(args.get("file") or ""))
        if found is None:
            raise _SlackError("file_not_found")
        return {"file": dict(found[0])}

    def _assistant_thread(self, args: dict[str, Any]) -> tuple[str, str]:
        channel = self._require_channel(args, "channel_id")
        thread_ts = args.get("thread_ts")
        if not thread_ts or not isinstance(thread_ts, str):
            raise _SlackError("invalid_arguments", "missing required field: thread_ts")
        return channel, thread_ts

    def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        key = self._assistant_thread(args)
        status = args.get("status")
        if not isinstance(status, str):
            raise _SlackError("invalid_arguments", "missing required field: status")
        self._status[key] = status
        return {}

    def _set_suggested_prompts(self, args: dict[str, Any]) -> dict[str, Any]:
        # without thread_ts: pinned at the top of the app's DM (the agent view), key (channel, "")
        if args.get("thread_ts") is None:
            key = (self._require_channel(args, "channel_id"), "")
        else:
            key = self._assistant_thread(args)
        prompts = args.get("prompts")
        if not isinstance(prompts, list) or not prompts or len(prompts) > 4:
            raise _SlackError("invalid_arguments", "prompts must be a list of 1 to 4 prompts")
        for prompt in prompts:
            if not isinstance(prompt, dict) or not prompt.get("title") or not prompt.get("message"):
                raise _SlackError("invalid_arguments", "each prompt needs a title and a message")
        self._prompts[key] = prompts
        return {}

    def _set_title(self, args: dict[str, Any]) -> dict[str, Any]:
        key = self._assistant_thread(args)
        title = args.get("title")
        if not title or not isinstance(title, str):
            raise _SlackError("invalid_arguments", "missing required field: title")
        self._titles[key] = title
        return {}


# --------------------------------------------------------------------------------------------
# Request parsing and validation


async def _read_request(request: Request) -> tuple[str | None, dict[str, Any], str | None]:
    """(token, args, parse error) from query string, JSON or form body, like Slack reads them."""
    args: dict[str, Any] = dict(request.query_params)
    content_type = request.headers.get("content-type", "").lower()
    raw = await request.body()
    if raw:
        if content_type.startswith("application/json"):
            try:
                body = json.loads(raw)
            except ValueError:
                return None, args, "invalid_json"
            if not isinstance(body, dict):
                return None, args, "invalid_json"
            args.update(body)
        elif content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.form()
            for key, value in form.multi_items():
                args[key] = f"<file {value.filename}>" if isinstance(value, UploadFile) else value
        else:
            return None, args, "invalid_form_data"
    for key in _JSON_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            try:
                args[key] = json.loads(value)
            except ValueError:
                return None, args, f"invalid_{key}_format"
    token = None
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        token = auth[7:].strip() or None
    form_token = args.pop("token", None)
    token = token or (str(form_token) if form_token else None)
    return token, args, None


def _check_content(args: dict[str, Any], *, required: bool) -> None:
    text = args.get("text")
    if text is not None and not isinstance(text, str):
        raise _SlackError("invalid_arguments", "text must be a string")
    if "blocks" in args:
        _check_blocks(args["blocks"])
    if required and not text and not args.get("blocks") and not args.get("attachments"):
        raise _SlackError("no_text")
    if text and len(text) > MAX_TEXT:
        raise _SlackError("msg_too_long")


def _check_metadata(args: dict[str, Any]) -> None:
    if "metadata" not in args:
        return
    metadata = args["metadata"]
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("event_type"), str)
        or not metadata["event_type"]
        or not isinstance(metadata.get("event_payload"), dict)
    ):
        raise _SlackError("invalid_metadata_format")


def _check_blocks(blocks: Any) -> None:
    if isinstance(blocks, str):
        raise _SlackError("invalid_blocks_format")
    if not isinstance(blocks, list):
        raise _SlackError("invalid_blocks_format", "blocks must be an array")
    if len(blocks) > MAX_BLOCKS:
        raise _SlackError(
            "invalid_blocks", f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"
        )
    for i, block in enumerate(blocks):
        where = f"[json-pointer:/blocks/{i}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _SlackError("invalid_blocks", f"missing required field: type {where}")
        kind = block["type"]
        if kind == "section":
            text = block.get("text")
            fields = block.get("fields")
            if text is None and not fields:
                raise _SlackError("invalid_blocks", f"must provide text or fields {where}")
            if text is not None:
                _check_text_object(text, MAX_SECTION_TEXT, where + "/text")
            if fields is not None:
                if not isinstance(fields, list) or len(fields) > MAX_SECTION_FIELDS:
                    raise _SlackError("invalid_blocks", f"at most 10 fields {where}/fields")
                for j, field in enumerate(fields):
                    _check_text_object(field, MAX_FIELD_TEXT, f"{where}/fields/{j}")
        elif kind == "header":
            _check_text_object(block.get("text"), MAX_HEADER_TEXT, where + "/text", plain=True)
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text or len(text) > MAX_MARKDOWN_TEXT:
                raise _SlackError("invalid_blocks", f"invalid markdown text {where}/text")
        elif kind in ("context", "actions", "context_actions"):
            elements = block.get("elements")
            limit = _ELEMENT_LIMITS[kind]
            if not isinstance(elements, list) or not elements or len(elements) > limit:
                raise _SlackError("invalid_blocks", f"1 to {limit} elements needed {where}")
            if kind == "context_actions":
                for j, element in enumerate(elements):
                    _check_context_action(element, f"{where}/elements/{j}")


_ELEMENT_LIMITS = {"context": 10, "actions": 25, "context_actions": 5}


def _check_context_action(element: Any, where: str) -> None:
    """A context_actions element: feedback_buttons (both buttons, each with a plain text
    of at most 75 characters and a value) or an icon_button."""
    kind = element.get("type") if isinstance(element, dict) else None
    if kind not in ("feedback_buttons", "icon_button"):
        raise _SlackError("invalid_blocks", f"unsupported element type [json-pointer:{where}]")
    action_id = element.get("action_id")
    if action_id is not None and (not isinstance(action_id, str) or len(action_id) > 255):
        raise _SlackError("invalid_blocks", f"invalid action_id [json-pointer:{where}]")
    if kind != "feedback_buttons":
        return
    for side in ("positive_button", "negative_button"):
        button = element.get(side)
        if not isinstance(button, dict):
            raise _SlackError("invalid_blocks", f"missing required field: {side} {where}")
        _check_text_object(button.get("text"), 75, f"{where}/{side}/text", plain=True)
        value = button.get("value")
        if not isinstance(value, str) or not value or len(value) > 2000:
            raise _SlackError("invalid_blocks", f"invalid value [json-pointer:{where}/{side}]")


def _check_text_object(obj: Any, limit: int, where: str, *, plain: bool = False) -> None:
    allowed = ("plain_text",) if plain else ("plain_text", "mrkdwn")
    if not isinstance(obj, dict) or obj.get("type") not in allowed:
        raise _SlackError("invalid_blocks", f"invalid text object [json-pointer:{where}]")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        raise _SlackError("invalid_blocks", f"missing text [json-pointer:{where}/text]")
    if len(text) > limit:
        raise _SlackError(
            "invalid_blocks", f"must be less than {limit + 1} characters [json-pointer:{where}]"
        )


def _flag(value: Any) -> bool:
    """A boolean argument as Slack reads it: true, "true" or "1"."""
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


#: the arguments conversations.history and conversations.replies take
_HISTORY_ARGS = {"channel", "cursor", "limit", "oldest", "latest", "inclusive"}
_HISTORY_ARGS |= {"include_all_metadata"}
_REPLIES_ARGS = _HISTORY_ARGS | {"ts"}


def _known_args(args: dict[str, Any], known: set[str]) -> None:
    """A method refuses an argument it does not take (Slack ignores it; a test should not)."""
    unknown = sorted(set(args) - known)
    if unknown:
        raise _SlackError("invalid_arguments", f"unknown argument(s): {', '.join(unknown)}")


def _cursor(offset: int) -> str:
    return base64.b64encode(f"offset:{offset}".encode()).decode()


def _cursor_offset(cursor: Any) -> int:
    """Where a page starts: 0 without a cursor; ``invalid_cursor`` for one not handed out."""
    if not cursor:
        return 0
    try:
        kind, _, offset = base64.b64decode(str(cursor), validate=True).decode().partition(":")
        if kind == "offset" and offset.isdigit():
            return int(offset)
    except ValueError:
        pass
    raise _SlackError("invalid_cursor")


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    try:
        return int(seconds), int(fraction.ljust(6, "0")[:6] or 0)
    except ValueError:
        return 0, 0


# --------------------------------------------------------------------------------------------
# What Slack sends to the bot


def event_payload(
    event: Mapping[str, Any],
    *,
    event_id: str | None = None,
    team_id: str = "T1",
    api_app_id: str = "A1",
    bot_user_id: str = "UBOT",
    event_time: int | None = None,
    token: str = "verification-token",
) -> str:
    """The JSON text of an Events API `event_callback` wrapping `event`.

    `event_id` defaults to a fresh unique id; `event.event_ts` defaults to `event.ts`.
    """
    event = dict(event)
    if "ts" in event:
        event.setdefault("event_ts", event["ts"])
    return json.dumps(
        {
            "token": token,
            "team_id": team_id,
            "context_team_id": team_id,
            "api_app_id": api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()) if event_time is None else event_time,
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": team_id,
                    "user_id": bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }
    )


def url_verification_payload(
    challenge: str = "challenge-token", token: str = "verification-token"
) -> str:
    """The JSON text of the `url_verification` request Slack sends when the URL is configured."""
    return json.dumps({"token": token, "challenge": challenge, "type": "url_verification"})


def signed_headers(
    body: str | bytes,
    signing_secret: str,
    timestamp: int | str | None = None,
    retry_num: int | None = None,
    retry_reason: str | None = None,
    *,
    content_type: str | None = None,
) -> dict[str, str]:
    """Headers Slack would send with `body`: signature, timestamp, content type, retry info.

    `timestamp` defaults to now (pass an old one to test replay protection); the content type
    defaults to JSON for a body that looks like JSON and to form-encoded otherwise.
    """
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=ts, body=body)
    text = body.decode() if isinstance(body, bytes) else body
    if content_type is None:
        is_json = text.lstrip().startswith(("{", "["))
        content_type = "application/json" if is_json else "application/x-www-form-urlencoded"
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature or "",
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
    if retry_reason is not None:
        headers["X-Slack-Retry-Reason"] = retry_reason
    return headers


def block_actions_payload(
    action_id: str,
    value: str | None = None,
    *,
    user_id: str = "U1",
    channel_id: str = "C1",
    message_ts: str = "1700000000.000100",
    thread_ts: str | None = None,
    block_id: str = "b1",
    action_type: str = "button",
    message_text: str = "",
    trigger_id: str | None = None,
    response_url: str | None = None,
    team_id: str = "T1",
    user_team_id: str | None = None,
    api_app_id: str = "A1",
    token: str = "verification-token",
) -> str:
    """The form-encoded body (`payload=<json>`) of a `block_actions` interactivity request
    (`user_team_id`: the presser's own workspace, in a shared channel; `team_id` by default).

    body = block_actions_payload(
        "feedback_good",            # action_id
        "42",                       # value of the button (omitted when None)
        user_id="U1",               # who clicked
        channel_id="C1",
        message_ts="1700000000.000100",   # the message holding the button
        thread_ts="1700000000.000001",    # its thread, if any
        block_id="b1",
        action_type="button",
        response_url="https://hooks.slack.com/actions/T1/1/x",  # omitted when None
    )
    headers = signed_headers(body, signing_secret="secret")
    """
    action: dict[str, Any] = {
        "action_id": action_id,
        "block_id": block_id,
        "type": action_type,
        "action_ts": f"{time.time():.6f}",
    }
    if value is not None:
        action["value"] = value
    if action_type == "button":
        action["text"] = {"type": "plain_text", "text": action_id, "emoji": True}
    message: dict[str, Any] = {
        "type": "message",
        "ts": message_ts,
        "text": message_text,
        "user": "UBOT",
        "bot_id": "BBOT",
    }
    if thread_ts is not None:
        message["thread_ts"] = thread_ts
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel_id,
        "is_ephemeral": False,
    }
    if thread_ts is not None:
        container["thread_ts"] = thread_ts
    payload: dict[str, Any] = {
        "type": "block_actions",
        "token": token,
        "api_app_id": api_app_id,
        "team": {"id": team_id, "domain": "fake-workspace"},
        "user": {
            "id": user_id,
            "username": user_id.lower(),
            "name": user_id.lower(),
            "team_id": user_team_id or team_id,
        },
        "channel": {"id": channel_id, "name": "general"},
        "container": container,
        "message": message,
        "trigger_id": trigger_id or f"{int(time.time())}.1.{uuid.uuid4().hex[:16]}",
        "actions": [action],
        "state": {"values": {}},
        "is_enterprise_install": False,
    }
    if response_url is not None:
        payload["response_url"] = response_url
    return urlencode({"payload": json.dumps(payload)})
