"""Everything the bot posts: the working sign, the answer in chunks, the failure notice.

A Slack error here is logged and ends that post, never the process: the turn is already
stored, and other channels keep being served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.service import Reply
from bot.slack.events import Question
from bot.slack.format import escape, format_answer

log = logging.getLogger(__name__)

WORKING_REACTION = "eyes"
#: Slack allows about one message a second per channel
POST_INTERVAL_S = 1.0
SOMETHING_WENT_WRONG = (
    "Sorry, something went wrong while I was answering. Please try again; "
    "if it keeps happening, ask an admin to look at the bot's logs."
)


class ChannelPacer:
    """One poster per channel at a time, at most one message per ``interval``."""

    def __init__(self, interval: float = POST_INTERVAL_S) -> None:
        self.interval = interval
        self._slots: dict[str, _Slot] = {}

    @contextlib.asynccontextmanager
    async def turn(self, channel: str) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Hold the channel for one answer; call the yielded ``pace()`` before each post."""
        slot = self._slots.setdefault(channel, _Slot())
        slot.users += 1
        try:
            async with slot.lock:
                yield slot.pace_with(self.interval)
        finally:
            slot.users -= 1
            # kept for one interval after the last post, so the next answer is paced too
            asyncio.get_running_loop().call_later(self.interval, self._forget, channel, slot)

    def _forget(self, channel: str, slot: _Slot) -> None:
        if slot.users == 0 and self._slots.get(channel) is slot:
            del self._slots[channel]


class _Slot:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0
        self.last_post = float("-inf")

    def pace_with(self, interval: float) -> Callable[[], Awaitable[None]]:
        async def pace() -> None:
            wait = self.last_post + interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.last_post = time.monotonic()

        return pace


class Replies:
    """Posts to Slack for turns (``chat:write``, ``reactions:write``)."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self.pacer = ChannelPacer()

    async def working(self, question: Question) -> None:
        """Show that the bot is on it: a reaction on the person's message."""
        await self._quietly(
            "reactions.add",
            self.client.reactions_add(
                channel=question.channel, timestamp=question.ts, name=WORKING_REACTION
            ),
        )

    async def finished(self, question: Question) -> None:
        await self._quietly(
            "reactions.remove",
            self.client.reactions_remove(
                channel=question.channel, timestamp=question.ts, name=WORKING_REACTION
            ),
        )

    async def answer(self, question: Question, reply: Reply) -> None:
        """The answer as mrkdwn chunks in order, or the failure as one plain message."""
        if reply.ok:
            chunks = format_answer(reply.text)
        else:  # the core's message is already short and plain
            chunks = [escape(reply.text)] if reply.text.strip() else []
        await self._post(question, chunks or [SOMETHING_WENT_WRONG])

    async def failed(self, question: Question) -> None:
        await self._post(question, [SOMETHING_WENT_WRONG])

    async def _post(self, question: Question, chunks: list[str]) -> None:
        async with self.pacer.turn(question.channel) as pace:
            for chunk in chunks:
                await pace()
                posted = await self._quietly(
                    "chat.postMessage",
                    self.client.chat_postMessage(
                        channel=question.channel,
                        thread_ts=question.thread_ts,
                        text=chunk,
                        unfurl_links=False,
                        unfurl_media=False,
                    ),
                )
                if not posted:
                    return  # the rest would fail the same way, and out of order

    async def _quietly(self, method: str, call: Awaitable[object]) -> bool:
        try:
            await call
            return True
        except SlackApiError as exc:
            log.warning("Slack %s failed: %s", method, exc.response.get("error"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("Slack %s failed: %s", method, type(exc).__name__)
        return False
