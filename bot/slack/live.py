"""LiveStatus: what a turn shows while it runs when its answer is not streamed (see
bot.slack.stream): the steps under way ("Looking up TASK-123 in Jira…") in one message of
the thread that is posted at the first step and then edited; in the assistant pane the
steps go to the pane's status line instead. Slack allows about one edit a second, so at
most one goes out per ``interval``: newer text replaces what waits. Once the answer is up,
the message is deleted. Its ts is told to ``on_posted`` as soon as it is known, so that
whoever takes the turn over can clean it up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bot.messages import ToolCall
from bot.slack.display import Shown
from bot.slack.events import Thread
from bot.slack.format import escape, neutralise_mentions
from bot.slack.poster import Poster

#: at most one edit of the live message (or status) a second
UPDATE_INTERVAL_S = 1.0
#: the first step's calls wait this long at most for the live message to be posted and
#: its ts noted: a process killed while they run leaves a message its successor can find
FIRST_POST_WAIT_S = 2.0


class LiveStatus:
    """A Display (bot.slack.display) of the steps alone: the answer is posted when done."""

    streams_text = False

    def __init__(
        self,
        replies: Poster,
        thread: Thread,
        describe: Callable[[ToolCall], str],
        *,
        pane: bool = False,
        interval: float = UPDATE_INTERVAL_S,
        on_posted: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.replies = replies
        self.on_posted = on_posted
        self.thread = thread
        self.describe = describe
        self.pane = pane
        self.interval = interval
        #: the live message, once posted
        self.ts: str | None = None
        self._wanted: tuple[str, bool] | None = None  # (text, for the status line)
        self._shown: tuple[str, bool] | None = None
        self._last = float("-inf")
        self._pending: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def steps(self, calls: Sequence[ToolCall]) -> None:
        """The round's calls are about to run."""
        steps = [self.describe(call) for call in calls]
        if self.pane:  # the status line is plain text: it neither pings nor links
            self._want("\n".join(f"{step}…" for step in steps), status=True)
            return
        # in a message, the descriptions (the model's arguments) are escaped as model text
        shown = "\n".join(f"{neutralise_mentions(escape(step))}…" for step in steps)
        first = self.ts is None and self._shown is None
        self._want(f"_{shown}_", status=False)
        if first and self._pending is not None:
            # the calls run once the message is up and its ts noted, or after a slow Slack
            # (the post still goes on: asyncio.wait neither cancels nor raises)
            await asyncio.wait({self._pending}, timeout=FIRST_POST_WAIT_S)

    async def start(self) -> None:
        """The first step posts the message."""

    async def text(self, piece: str) -> None:
        """The answer is not shown until it is whole."""

    async def done(self, call: ToolCall, failed: bool) -> None:
        """A step's end shows as the next step (or the answer)."""

    async def end(
        self,
        answer: str | None,
        *,
        post_id: str | None,
        blocks: list[dict[str, Any]] | None,
        resumed: bool,
    ) -> Shown:
        """The turn is over: nothing more goes out (``close`` deletes the message); the
        answer is posted whole."""
        self._closed = True
        if self._pending is not None:
            if not self._lock.locked():  # waiting: cancelled; sending: let it finish
                self._pending.cancel()
            await asyncio.gather(self._pending, return_exceptions=True)
        async with self._lock:
            if self.pane:
                await self.replies.set_status(self.thread, "")
        return Shown()

    async def tidy(self, answered: bool) -> None:
        """The message goes at ``close``, answered or not."""

    async def close(self) -> None:
        """After the answer (what the person waits for goes out first): the message goes."""
        if self.ts is not None:
            ts, self.ts = self.ts, None
            await self.replies.delete(self.thread.channel, ts)

    def _want(self, text: str, *, status: bool) -> None:
        self._wanted = (text, status)
        if self._closed:
            return
        if self._pending is None or self._pending.done():
            wait = self._last + self.interval - time.monotonic()
            self._pending = asyncio.create_task(self._flush(max(wait, 0.0)))

    def _take_wanted(self) -> tuple[str, bool] | None:
        # a method, not inline: mypy would keep self._wanted None past the awaits below
        wanted, self._wanted = self._wanted, None
        return wanted

    async def _flush(self, wait: float) -> None:
        await asyncio.sleep(wait)
        async with self._lock:
            wanted = self._take_wanted()
            if wanted is None or wanted == self._shown:
                return
            self._shown, self._last = wanted, time.monotonic()
            text, status = wanted
            if status:
                await self.replies.set_status(self.thread, text)
            elif self.ts is None:
                self.ts = await self.replies.post(self.thread, text)
                if self.ts is not None and self.on_posted is not None:
                    await self.on_posted(self.ts)
            else:
                await self.replies.update(self.thread.channel, self.ts, text)
        # what came in meanwhile goes out one interval later
        if self._wanted is not None and not self._closed:
            self._pending = asyncio.create_task(self._flush(self.interval))
