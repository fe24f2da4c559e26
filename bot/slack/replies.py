"""Everything the bot posts: the working sign, the answer in chunks, the failure notice,
cards with buttons, and the live message or status a turn shows while it runs.

A Slack error here is logged and ends that post, never the process: the turn is already
stored, and other channels keep being served.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.service import Reply
from bot.slack.events import Question, Thread
from bot.slack.format import escape, format_answer
from bot.slack.pacing import ChannelPacer

log = logging.getLogger(__name__)

WORKING_REACTION = "eyes"
SOMETHING_WENT_WRONG = (
    "Sorry, something went wrong while I was answering. Please try again; "
    "if it keeps happening, ask an admin to look at the bot's logs."
)

Blocks = list[dict[str, Any]]


class Replies:
    """Posts to Slack for turns (``chat:write``, ``reactions:write``, ``assistant:write``)."""

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

    async def answer(self, thread: Thread, reply: Reply, into: str | None = None) -> None:
        """The answer as mrkdwn chunks in order, or the failure as one plain message.
        ``into``: a message of the bot's (the streamed answer) that becomes the first chunk."""
        if reply.ok:
            chunks = format_answer(reply.text)
        else:  # the core's message is already short and plain
            chunks = [escape(reply.text)] if reply.text.strip() else []
        chunks = chunks or [SOMETHING_WENT_WRONG]
        if into is not None and await self.update(thread.channel, into, chunks[0]):
            chunks = chunks[1:]
        elif into is not None:
            await self.delete(thread.channel, into)
        async with self.pacer.turn(thread.channel) as pace:
            for chunk in chunks:
                await pace()
                if await self._send(thread, chunk) is None:
                    return  # the rest would fail the same way, and out of order

    async def failed(self, thread: Thread) -> None:
        await self.post(thread, SOMETHING_WENT_WRONG)

    async def post(self, thread: Thread, text: str, blocks: Blocks | None = None) -> str | None:
        """One message in the thread, paced with the channel's other posts; its ts."""
        async with self.pacer.turn(thread.channel) as pace:
            await pace()
            return await self._send(thread, text, blocks)

    async def update(self, channel: str, ts: str, text: str, blocks: Blocks | None = None) -> bool:
        # blocks=[] takes a card's buttons away: the text is all that is left
        call = self.client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks or [])
        return await self._quietly("chat.update", call) is not None

    async def delete(self, channel: str, ts: str) -> None:
        await self._quietly("chat.delete", self.client.chat_delete(channel=channel, ts=ts))

    async def tell(self, thread: Thread, user: str, text: str) -> None:
        """A message only ``user`` sees."""
        call = self.client.chat_postEphemeral(
            channel=thread.channel, thread_ts=thread.thread_ts, user=user, text=text
        )
        await self._quietly("chat.postEphemeral", call)

    async def status(self, thread: Thread, status: str) -> None:
        """The assistant pane's status line ("" clears it)."""
        call = self.client.assistant_threads_setStatus(
            channel_id=thread.channel, thread_ts=thread.thread_ts or "", status=status
        )
        await self._quietly("assistant.threads.setStatus", call)

    async def title(self, thread: Thread, title: str) -> None:
        call = self.client.assistant_threads_setTitle(
            channel_id=thread.channel, thread_ts=thread.thread_ts or "", title=title
        )
        await self._quietly("assistant.threads.setTitle", call)

    async def _send(self, thread: Thread, text: str, blocks: Blocks | None = None) -> str | None:
        call = self.client.chat_postMessage(
            channel=thread.channel,
            thread_ts=thread.thread_ts,
            text=text,
            blocks=blocks,
            unfurl_links=False,
            unfurl_media=False,
        )
        posted = await self._quietly("chat.postMessage", call)
        return posted.get("ts") if posted is not None else None

    async def _quietly(self, method: str, call: Awaitable[Any]) -> Any:
        """The response, or None (logged) when Slack refused or could not be reached."""
        try:
            return await call
        except SlackApiError as exc:
            log.warning("Slack %s failed: %s", method, exc.response.get("error"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("Slack %s failed: %s", method, type(exc).__name__)
        return None
