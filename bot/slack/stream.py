"""AnswerStream: an answer written into one message of a thread with Slack's streaming
methods, through slack_sdk's ``chat_stream`` helper (chat.startStream, chat.appendStream,
chat.stopStream), as the model writes it.

* Each tool call is a ``task_update`` chunk: ``in_progress`` when it starts, ``complete`` or
  ``error`` when it ends, titled in words ("Looking up TASK-123 in Jira").
* The model's text goes out as Markdown made safe piece by piece (bot.slack.format.markdown),
  cut only where a piece reads as it will in the whole.
* Everything waiting goes in one call, at most one call per ``interval`` (appendStream is a
  Tier 4 method); the first one starts the stream, whose ts is told to ``on_started``.
* A message holds at most ``limit`` characters; text beyond it waits for ``finish``, which
  says how much of the answer the stream holds so that the rest is posted.
* Any error of those methods ends the streaming for good (``message_not_in_streaming_state``
  for a stream Slack expired): ``finish`` then says the stream holds none of the answer, and
  the answer is posted whole, taking the message over (see Poster.answer).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_chat_stream import AsyncChatStream

from bot.messages import ToolCall
from bot.slack.display import Shown
from bot.slack.events import Thread
from bot.slack.format.escape import neutralise_mentions, strip_bidi
from bot.slack.format.markdown import MarkdownSafety
from bot.slack.poster import POST_EVENT, Blocks, Poster, failure

log = logging.getLogger(__name__)

#: at most one call of a stream a second
APPEND_INTERVAL_S = 1.0
#: characters of Markdown in one streamed message (Slack takes 12,000)
STREAM_LIMIT = 10_000
#: Slack cuts a task's title at about 256 characters
TITLE_MAX = 250
#: each task shown in the order it happens, with the text around it
TASK_DISPLAY_MODE = "timeline"
#: the thread's status while a streamed answer is on its way
THINKING = "is thinking…"
SLACK_FAILURES = (SlackApiError, SlackRequestError, aiohttp.ClientError, TimeoutError)


@dataclass(frozen=True)
class Recipient:
    """Who a stream in a channel is for: the person who asked, and their team."""

    user_id: str
    team_id: str


class AnswerStream:
    """A Display (bot.slack.display) that streams the answer, each tool call a task."""

    streams_text = True

    def __init__(
        self,
        poster: Poster,
        thread: Thread,
        describe: Callable[[ToolCall], str],
        *,
        recipient: Recipient | None,
        interval: float = APPEND_INTERVAL_S,
        limit: int = STREAM_LIMIT,
        on_started: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        assert thread.thread_ts is not None, "a stream is a reply in a thread"
        self.poster, self.client = poster, poster.client
        self.thread, self.describe = thread, describe
        self.recipient, self.interval, self.limit = recipient, interval, limit
        self.on_started = on_started
        self._streamer: AsyncChatStream | None = None
        self._pending: list[dict[str, Any]] = []
        self._round = ""  # the model's text in this round
        self._fed = 0  # of it, made safe (sent or waiting)
        self._shown = 0  # characters of Markdown in the message, sent or waiting
        self._safety = MarkdownSafety()
        self._full = self._failed = self._closed = False
        self._last = float("-inf")
        self._sender: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def ts(self) -> str | None:
        """The streamed message, once started."""
        return self._streamer.ts if self._streamer is not None else None

    async def steps(self, calls: Sequence[ToolCall]) -> None:
        """The round's text is over; its calls start, each a task."""
        if self._round[self._fed :]:
            self._add_text(self._round[self._fed :])
        if self._round:  # what the model said before its calls stays, apart from what follows
            self._add_text(self._safety.closing() + "\n\n")
        self._round, self._fed = "", 0
        self._pending += [self._task(call, "in_progress") for call in calls]
        self._want()

    async def done(self, call: ToolCall, failed: bool) -> None:
        """The call's task is complete (or failed)."""
        self._pending.append(self._task(call, "error" if failed else "complete"))
        self._want()

    async def text(self, piece: str) -> None:
        """The model wrote ``piece``; what can be cut off goes out."""
        self._round += piece
        if self._full or self._failed:  # the rest waits for finish (or goes posted)
            return
        cut = self._safety.cut(self._round, self._fed)
        if cut > self._fed and self._add_text(self._round[self._fed : cut]):
            self._fed = cut
            self._want()

    async def start(self) -> None:
        """The thread's status says the bot is thinking (Slack clears it at the reply)."""
        await self.poster.set_status(self.thread, THINKING)

    async def end(
        self,
        answer: str | None,
        *,
        post_id: str | None,
        blocks: Blocks | None,
        resumed: bool,
    ) -> Shown:
        """The stream ends with ``answer`` (the buttons under it); what it could not hold is
        posted after it, into the streamed message when it holds none of it."""
        # taken over without a word streamed: its answer may have been posted before
        shown = None if resumed and self.ts is None else answer
        held = await self.finish(shown, post_id=post_id, blocks=blocks)
        return Shown(self.ts if held is None and answer is not None else None, held or 0)

    async def tidy(self, answered: bool) -> None:
        """The streamed message is the answer (whoever takes over is told), or it goes:
        after the card or the failure, what the person waits for goes out first."""
        if self.ts is None:
            return
        if answered:
            if self.on_started is not None:
                await self.on_started("")
        else:
            await self.poster.delete(self.thread.channel, self.ts)

    async def close(self) -> None:
        await self.poster.set_status(self.thread, "")

    async def finish(
        self, answer: str | None, *, post_id: str | None = None, blocks: Blocks | None = None
    ) -> int | None:
        """Stop the stream, ending it with ``answer`` (None: the turn has none; the message
        is left for the caller to delete). How much of ``answer`` the message holds (its
        metadata says so, for a process taking over): all of it, or the part that fitted
        (the rest is to be posted); None when it holds none of it (it failed, or never
        started): the answer is to be posted whole, ``ts`` (if any) taken over."""
        await self._close()
        if answer is None or not answer.startswith(self._round[: self._fed]):
            await self._stop()
            return None
        whole = not self._full and self._add_text(answer[self._fed :])
        held = len(answer) if whole else self._fit(answer)
        self._pending.append(_markdown(self._safety.closing()))
        payload = {"post_id": f"{post_id}.0", "upto": held} if post_id else None
        metadata = {"event_type": POST_EVENT, "event_payload": payload} if payload else None
        return held if await self._stop(blocks=blocks, metadata=metadata) else None

    def _add_text(self, raw: str) -> bool:
        """Queue ``raw`` (from one cut to the next), made safe, if the message has room."""
        trial = dataclasses.replace(self._safety)
        safe = trial.feed(raw)
        if self._shown + len(safe) > self.limit:
            self._full = True
            return False
        self._safety, self._shown = trial, self._shown + len(safe)
        if self._pending and self._pending[-1]["type"] == "markdown_text":
            self._pending[-1] = _markdown(self._pending[-1]["text"] + safe)
        elif safe:
            self._pending.append(_markdown(safe))
        return True

    def _fit(self, answer: str) -> int:
        """As much of the rest of ``answer`` as fits, up to a cut; where it ends. The cut is
        looked for within the room left (a piece that came longer than the whole message
        would otherwise leave it empty), in half of it when made safe it did not fit."""
        end, room = self._fed, self.limit - self._shown
        while room > 0:
            cut = self._safety.cut(answer[: end + room], end)
            if cut > end and self._add_text(answer[end:cut]):
                end, room = cut, self.limit - self._shown
            else:
                room //= 2
        return end

    def _task(self, call: ToolCall, status: str) -> dict[str, Any]:
        # the title is the model's arguments in words: it may not ping, nor read backwards
        title = neutralise_mentions(strip_bidi(self.describe(call)))[:TITLE_MAX]
        return {"type": "task_update", "id": call.id, "title": title, "status": status}

    def _want(self) -> None:
        if self._closed or self._failed or (self._sender and not self._sender.done()):
            return
        wait = max(self._last + self.interval - time.monotonic(), 0.0)
        self._sender = asyncio.create_task(self._send(wait))

    async def _send(self, wait: float) -> None:
        await asyncio.sleep(wait)
        async with self._lock:
            chunks, self._pending = self._pending, []
            if chunks and not self._failed:
                self._last = time.monotonic()
                await self._call("append", chunks=chunks)
        if self._pending and not (self._closed or self._failed):
            # what came in meanwhile goes out one interval later
            self._sender = asyncio.create_task(self._send(self.interval))

    async def _close(self) -> None:
        """Nothing more goes out before the stop: a wait is cut short, a call finishes."""
        self._closed = True
        if self._sender is not None:
            if not self._lock.locked():
                self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)

    async def _stop(self, **end: Any) -> bool:
        if self._failed or (self._streamer is None and not end.get("metadata")):
            return False  # nothing was shown: there is nothing to stop
        chunks = [c for c in self._pending if c["type"] != "markdown_text" or c["text"]]
        self._pending = []
        return await self._call("stop", chunks=chunks, **end)

    async def _call(self, what: str, **arguments: Any) -> bool:
        """One call of the stream (starting it first if need be); False once it failed."""
        method = "chat.startStream"
        try:
            if self._streamer is None:
                self._streamer = await self.client.chat_stream(
                    channel=self.thread.channel,
                    thread_ts=self.thread.thread_ts or "",
                    recipient_user_id=self.recipient.user_id if self.recipient else None,
                    recipient_team_id=self.recipient.team_id if self.recipient else None,
                    task_display_mode=TASK_DISPLAY_MODE,
                )
            started = self._streamer.ts is not None
            method = f"chat.{what}Stream"
            if what == "append":
                await self._streamer.append(**arguments)
            else:
                await self._streamer.stop(**arguments)
        except SLACK_FAILURES as exc:
            self._failed = True
            reason = failure(method, exc)
            log.warning("Slack refused the stream in %s (%s)", self.thread.channel, reason)
            return False
        if not started and self.ts is not None and self.on_started is not None:
            await self.on_started(self.ts)
        return True


def _markdown(text: str) -> dict[str, Any]:
    return {"type": "markdown_text", "text": text}
