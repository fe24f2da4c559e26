"""Poster: every Web API write of the bot: the progress reaction, the answer in chunks, the
failure notice, cards with buttons, and the live message or status a turn shows.

A Slack error here is logged and ends that post, never the process: the turn is already
stored, and other channels keep being served.

Slack takes no idempotency key, so the client does not send a post again once it may have
reached Slack (``NoDoublePostRetryHandler``). Each message carries an id of its own in its
metadata instead (``post_id``): when the connection drops after the request went out, the
thread is read back and the message is posted again only if that id is not there. The
posts of a turn have ids derived from the turn, so a process that takes a job over looks
for them first (``look_first``) and never posts one twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import HttpRequest, HttpResponse, RetryState
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot import metrics
from bot.agent.conversations import Reply
from bot.slack.answer_file import UPLOAD_FAILURES, attach_answer, failed_step
from bot.slack.events import Question, Thread
from bot.slack.format import escape, format_answer
from bot.slack.format.markdown import rest_of
from bot.slack.pacing import ChannelPacer
from bot.slack.workspace import NOT_SENT

log = logging.getLogger(__name__)

WORKING_REACTION = "eyes"
SOMETHING_WENT_WRONG = (
    "Sorry, something went wrong while I was answering. Please try again; "
    "if it keeps happening, ask an admin to look at the bot's logs."
)

Blocks = list[dict[str, Any]]

#: Web API methods that post (or add to a streamed message) anew each time they are sent
POSTING_METHODS = frozenset(
    {
        "chat.postMessage",
        "chat.postEphemeral",
        "chat.startStream",
        "chat.appendStream",
        "files.completeUploadExternal",
    }
)
#: connection errors raised before the request went out, so it cannot have reached Slack
NEVER_SENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
#: the metadata event type of the bot's messages; its payload's ``post_id`` tells them apart
POST_EVENT = "bot_post"
#: Slack errors that say the reaction is already as wanted
ALREADY_SO = frozenset({"already_reacted", "no_reaction"})
#: a lost top-level post (a DM) is looked for among this many newest messages
RECENT_MESSAGES = 50


class NoDoublePostRetryHandler(AsyncConnectionErrorRetryHandler):
    """Retries dropped connections, except for a post that may have reached Slack: sent
    again, it would show twice (``Replies`` looks for such a message before posting again)."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        method = request.url.rsplit("/", 1)[-1]
        if method in POSTING_METHODS and not isinstance(error, NEVER_SENT):
            return False
        return await super()._can_retry_async(
            state=state, request=request, response=response, error=error
        )


class Poster:
    """Posts to Slack for turns (``chat:write``, ``reactions:write``, ``assistant:write``,
    ``files:write`` for a long answer's file; a lost post is looked for with
    ``channels/groups/im/mpim:history``; a channel's name is read with
    ``channels/groups/mpim:read``). An answer that would take more than
    ``long_answer_messages`` messages (LONG_ANSWER_MESSAGES; 0: no limit) is posted as its
    first part, then the whole of it as a file (bot.slack.answer_file)."""

    def __init__(self, client: AsyncWebClient, *, long_answer_messages: int = 0) -> None:
        self.client = client
        self.pacer = ChannelPacer()
        self.long_answer_messages = long_answer_messages

    async def add_reaction(self, question: Question) -> None:
        """Show that the bot is on it: a reaction on the person's message."""
        await self._quietly(
            "reactions.add",
            self.client.reactions_add(
                channel=question.channel, timestamp=question.ts, name=WORKING_REACTION
            ),
        )

    async def remove_reaction(self, channel: str, ts: str) -> None:
        """The progress reaction comes off the person's message ``ts``."""
        await self._quietly(
            "reactions.remove",
            self.client.reactions_remove(channel=channel, timestamp=ts, name=WORKING_REACTION),
        )

    async def channel_name(self, channel: str) -> str | None:
        """The channel's name (``channels:read``/``groups:read``), or None: a DM has none,
        and Slack may refuse."""
        call = self.client.conversations_info(channel=channel)
        info = await self._quietly("conversations.info", call)
        return None if info is None else info["channel"].get("name")

    async def answer(
        self,
        thread: Thread,
        reply: Reply,
        into: str | None = None,
        *,
        post_id: str | None = None,
        look_first: bool = False,
        held: int = 0,
        footer: Blocks | None = None,
    ) -> None:
        """The answer as mrkdwn chunks in order, or the failure as one plain message.
        ``into``: a message of the bot's (a stream that failed) that becomes the first chunk.
        ``held``: a streamed message (``post_id``.0) holds that much of the answer already;
        the rest follows it. ``post_id``: the chunks' ids are derived from it;
        ``look_first``: a chunk already in the thread is not posted again (nor is what a
        streamed message found there holds). ``footer``: blocks under the last chunk, or
        under the first part of an answer attached as a file."""
        shown = await self._post_ids(thread) if look_first and post_id else {}
        streamed = shown.get(f"{post_id}.0", {}).get("upto")
        if isinstance(streamed, int) and 0 < streamed <= len(reply.text):
            held, into = streamed, None
        # the chunks' ids count from the streamed message (.0) when it holds the start
        first = 1 if held else 0
        chunks = self._chunks(reply, held)
        # past the limit, the file follows the first part: the stream's, else the first chunk
        attach_at = 1 - first if self._too_long(reply, first + len(chunks)) else None
        last = 0 if attach_at is not None else len(chunks) - 1

        def blocks(index: int) -> Blocks | None:
            # a chunk is at most a section's 3,000 characters (see format_answer)
            if not footer or index != last:
                return None
            return [{"type": "section", "text": {"type": "mrkdwn", "text": chunks[index]}}, *footer]

        if into is not None and chunks:
            metadata = _metadata(f"{post_id}.0" if post_id else None)
            if await self.update(thread.channel, into, chunks[0], blocks(0), metadata=metadata):
                chunks[0] = ""  # shown: it is .0
            else:
                await self.delete(thread.channel, into)
        async with self.pacer.turn(thread.channel) as pace:
            for index, chunk in enumerate(chunks):
                chunk_id = f"{post_id}.{first + index}" if post_id else None
                if index == attach_at and chunk_id not in shown:  # not posted as messages yet
                    await pace()
                    if await self._attach(thread, reply.text):
                        return
                if not chunk or chunk_id in shown:
                    continue
                await pace()
                if await self._send(thread, chunk, blocks(index), post_id=chunk_id) is None:
                    return  # the rest would fail the same way, and out of order

    def _too_long(self, reply: Reply, messages: int) -> bool:
        """Whether the answer would take more messages than the limit (0: none)."""
        return reply.ok and 0 < self.long_answer_messages < messages

    async def _attach(self, thread: Thread, markdown: str) -> bool:
        """The whole answer as a file in the thread; False when Slack refused it (logged)."""
        try:
            await attach_answer(self.client, thread, markdown)
        except UPLOAD_FAILURES as exc:
            step = failed_step(exc)
            log.warning(
                "could not attach a long answer as a file in %s (%s: %s): posting it as messages",
                thread.channel,
                step,
                failure(step, exc),
            )
            return False
        return True

    @staticmethod
    def _chunks(reply: Reply, held: int) -> list[str]:
        if not reply.ok:  # the core's message is already short and plain
            return [escape(reply.text)] if reply.text.strip() else [SOMETHING_WENT_WRONG]
        if held:
            return format_answer(rest_of(reply.text, held))
        return format_answer(reply.text) or [SOMETHING_WENT_WRONG]

    async def failed(self, thread: Thread) -> None:
        await self.post(thread, SOMETHING_WENT_WRONG)

    async def post(
        self,
        thread: Thread,
        text: str,
        blocks: Blocks | None = None,
        *,
        post_id: str | None = None,
        look_first: bool = False,
    ) -> str | None:
        """One message in the thread, paced with the channel's other posts; its ts.
        ``look_first``: when a message with ``post_id`` is in the thread, that one's ts."""
        if look_first and post_id:
            found = await self._posted(thread, post_id)
            if found is not None:
                return found
        async with self.pacer.turn(thread.channel) as pace:
            await pace()
            return await self._send(thread, text, blocks, post_id=post_id)

    async def update(
        self,
        channel: str,
        ts: str,
        text: str,
        blocks: Blocks | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> bool:
        # blocks=[] takes a card's buttons away: the text is all that is left
        call = self.client.chat_update(
            channel=channel, ts=ts, text=text, blocks=blocks or [], metadata=metadata
        )
        return await self._quietly("chat.update", call) is not None

    async def delete(self, channel: str, ts: str) -> None:
        await self._quietly("chat.delete", self.client.chat_delete(channel=channel, ts=ts))

    async def post_ephemeral(self, thread: Thread, user: str, text: str) -> None:
        """A message only ``user`` sees. Lost with a dropped connection (it cannot be looked
        up, so it is not sent again)."""
        call = self.client.chat_postEphemeral(
            channel=thread.channel, thread_ts=thread.thread_ts, user=user, text=text
        )
        await self._quietly("chat.postEphemeral", call)

    async def set_status(self, thread: Thread, status: str) -> None:
        """The assistant pane's status line ("" clears it)."""
        call = self.client.assistant_threads_setStatus(
            channel_id=thread.channel, thread_ts=thread.thread_ts or "", status=status
        )
        await self._quietly("assistant.threads.setStatus", call)

    async def set_suggested_prompts(
        self, channel: str, prompts: list[dict[str, str]], title: str
    ) -> None:
        """Prompts pinned at the top of the bot's DM (the agent view's Messages tab)."""
        call = self.client.assistant_threads_setSuggestedPrompts(
            channel_id=channel, prompts=prompts, title=title
        )
        await self._quietly("assistant.threads.setSuggestedPrompts", call)

    async def set_title(self, thread: Thread, title: str) -> None:
        call = self.client.assistant_threads_setTitle(
            channel_id=thread.channel, thread_ts=thread.thread_ts or "", title=title
        )
        await self._quietly("assistant.threads.setTitle", call)

    async def _send(
        self, thread: Thread, text: str, blocks: Blocks | None = None, post_id: str | None = None
    ) -> str | None:
        post_id = post_id or uuid.uuid4().hex

        def post() -> Awaitable[AsyncSlackResponse]:
            return self.client.chat_postMessage(
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                text=text,
                blocks=blocks,
                unfurl_links=False,
                unfurl_media=False,
                metadata=_metadata(post_id),
            )

        try:
            return (await post()).get("ts")
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            if not _may_have_posted(exc):
                _log_failure("chat.postMessage", failure("chat.postMessage", exc))
                return None
            log.warning(
                "lost Slack's response to chat.postMessage in %s (%s): looking for the message",
                thread.channel,
                failure("chat.postMessage", exc),
            )
        found = await self._posted(thread, post_id)
        if found is not None:
            return found
        posted = await self._quietly("chat.postMessage", post())
        return posted.get("ts") if posted is not None else None

    async def _posted(self, thread: Thread, post_id: str) -> str | None:
        """The ts of the message carrying ``post_id``, if Slack has it."""
        return (await self._post_ids(thread)).get(post_id, {}).get("ts")

    async def _post_ids(self, thread: Thread) -> dict[str, dict[str, Any]]:
        """The bot's messages where a post to ``thread`` lands: their metadata's payload and
        ts, by post id. Empty when Slack cannot be asked: a message shown twice beats an
        answer lost."""
        found = {}
        try:
            for message in await self._messages_around(thread):
                metadata = message.get("metadata") or {}
                payload = metadata.get("event_payload") or {}
                if metadata.get("event_type") == POST_EVENT and payload.get("post_id"):
                    found[str(payload["post_id"])] = {**payload, "ts": str(message["ts"])}
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning(
                "could not look for the bot's messages in %s (%s): posting again",
                thread.channel,
                failure(_read_method(thread), exc),
            )
        return found

    async def _messages_around(self, thread: Thread) -> list[dict[str, Any]]:
        """The messages where a post to ``thread`` lands, with their metadata."""
        if thread.thread_ts is None:  # a top-level post: among the newest messages
            newest = await self.client.conversations_history(
                channel=thread.channel, limit=RECENT_MESSAGES, include_all_metadata=True
            )
            return list(newest["messages"])
        pages = await self.client.conversations_replies(
            channel=thread.channel, ts=thread.thread_ts, include_all_metadata=True
        )
        return [message async for page in pages for message in page["messages"]]

    async def _quietly(self, method: str, call: Awaitable[Any]) -> Any:
        """The response, or None (logged) when Slack refused or could not be reached."""
        try:
            return await call
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            _log_failure(method, failure(method, exc))
        return None


def _log_failure(method: str, reason: str) -> None:
    # the sign is already up (a question taken over from a process that died) or already
    # down: nothing went wrong; a call not sent (access revoked) was logged once already
    quiet = reason in ALREADY_SO or reason == NOT_SENT
    log.log(logging.DEBUG if quiet else logging.WARNING, "Slack %s failed: %s", method, reason)


def _metadata(post_id: str | None) -> dict[str, Any] | None:
    """What tells the bot's message apart when a thread is read back."""
    if post_id is None:
        return None
    return {"event_type": POST_EVENT, "event_payload": {"post_id": post_id}}


def _may_have_posted(exc: Exception) -> bool:
    """The connection failed once the request may have been sent: Slack may have posted it."""
    return isinstance(exc, (aiohttp.ClientError, TimeoutError)) and not isinstance(exc, NEVER_SENT)


def failure(method: str, exc: Exception) -> str:
    """Why Slack's ``method`` failed (Slack's error code, or the connection error's name);
    counted in bot_slack_api_errors_total unless it says that all is as wanted."""
    reason = (
        str(exc.response.get("error")) if isinstance(exc, SlackApiError) else type(exc).__name__
    )
    if reason not in ALREADY_SO and reason != NOT_SENT:
        metrics.SLACK_API_ERRORS.labels(method, reason).inc()
    return reason


def _read_method(thread: Thread) -> str:
    """The method ``_messages_around`` reads ``thread`` with."""
    return "conversations.history" if thread.thread_ts is None else "conversations.replies"
