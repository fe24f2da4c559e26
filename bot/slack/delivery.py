"""Delivery: one stretch of a turn (a question, or a paused turn going on) as the thread
sees it: the steps live while it runs, then the answer, an approval card for a write the
model asked for, or a Continue button when the round cap cut it short."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import SQLAlchemyError

from bot.agent.loop import PAUSE, Approver, Decision
from bot.agent.service import Conversations, Reply
from bot.config import Settings
from bot.messages import ToolCall, TurnRecord
from bot.slack.cards import approval_card, continue_message, pending_calls
from bot.slack.events import Question, Thread
from bot.slack.live import LiveStatus
from bot.slack.replies import Replies

log = logging.getLogger(__name__)

#: runs the turn with the live status as its progress (and text) sink
Work = Callable[[LiveStatus], Awaitable[Reply | None]]
#: records a stored reply before it is posted; False: the question is not ours any more
Keep = Callable[[Reply], Awaitable[bool]]
TITLE_MAX = 60
EXPIRED = "This request expired, so nothing was done. Ask again if it is still needed."


async def _ask_a_person(call: ToolCall) -> Decision:
    return PAUSE


class Delivery:
    def __init__(self, conversations: Conversations, replies: Replies, settings: Settings):
        self.conversations = conversations
        self.store = conversations.store
        self.replies = replies
        self.settings = settings
        self.registry = conversations.loop.registry
        #: asked before each write: with WRITE_APPROVAL the turn pauses for a person
        self.approver: Approver | None = _ask_a_person if settings.WRITE_APPROVAL else None

    async def working(self, question: Question) -> None:
        await self.replies.working(question)
        if question.pane:
            title = " ".join(question.incoming.text.split())
            await self.replies.title(question.thread, title[:TITLE_MAX] or "New chat")

    async def finished(self, question: Question) -> None:
        await self.replies.finished(question)

    async def failed(self, question: Question) -> None:
        await self.replies.failed(question.thread)

    async def learn_channel_name(self, channel: str) -> None:
        """Store the channel's name for the admin pages, when Slack tells it."""
        name = await self.replies.channel_name(channel)
        if name is None:
            return
        try:
            await self.store.set_channel_name(channel, name)
        except (SQLAlchemyError, OSError):
            log.warning("could not store the name of %s", channel)

    async def answer(
        self, question: Question, keep: Keep, begun: Callable[[], None] | None = None
    ) -> bool:
        """Answer a question; whether its turn was stored (and its reply posted). ``keep``
        gets the stored reply before it is posted, so that another process can post it
        should this one die; when it says the question was taken over meanwhile, the
        process that took it answers, and nothing is posted here. ``begun`` is called once
        the turn has begun, just before the model is asked."""

        async def work(live: LiveStatus) -> Reply | None:
            reply = await self.conversations.handle(
                question.incoming,
                approver=self.approver,
                on_progress=live.steps,
                on_text=live.text if self.settings.STREAM_ANSWERS else None,
                on_begun=begun,
            )
            if reply.turn_id is not None and not await keep(reply):
                return None
            return reply

        reply = await self.run(question.thread, work, pane=question.pane)
        return reply is not None and reply.turn_id is not None

    async def resume(
        self, thread: Thread, turn_id: int, decisions: dict[str, Decision] | None = None
    ) -> Reply | None:
        """Go on with a stopped turn (None: someone else already did)."""

        async def work(live: LiveStatus) -> Reply | None:
            return await self.conversations.resume(
                turn_id,
                decisions,
                approver=self.approver,
                on_progress=live.steps,
                on_text=live.text if self.settings.STREAM_ANSWERS else None,
            )

        return await self.run(thread, work)

    async def run(self, thread: Thread, work: Work, *, pane: bool = False) -> Reply | None:
        live = LiveStatus(self.replies, thread, self.registry.describe, pane=pane)
        reply = None
        try:
            reply = await work(live)
        finally:
            streamed = await live.close(keep=reply is not None and reply.ok)
        try:
            if reply is not None:
                await self.post_reply(thread, reply, into=streamed)
        finally:
            # after the answer: what the person waits for goes out first
            await live.clear()
        return reply

    async def post_reply(self, thread: Thread, reply: Reply, into: str | None = None) -> None:
        """What the thread gets of a stretch that ended: the answer (``into`` the streamed
        message, if any), an approval card, or the answer and a Continue button after the
        round cap; nothing for an approval that expired."""
        if reply.outcome == "expired":
            return
        if reply.outcome == "awaiting_approval" and reply.turn_id is not None:
            await self.ask_approval(thread, reply.turn_id)
            return
        await self.replies.answer(thread, reply, into=into)
        if reply.outcome == "max_rounds" and reply.turn_id is not None:
            turn = await self.store.turn(reply.turn_id)
            text, blocks = continue_message(reply.turn_id, turn.rounds if turn else 0)
            await self.replies.post(thread, text, blocks)

    def card(self, turn: TurnRecord, settled: str | None = None) -> tuple[str, list]:  # type: ignore[type-arg]
        calls = pending_calls(turn, self.registry.writes)
        default = self.settings.JIRA_PROJECT
        return approval_card(
            turn, calls, self.registry.describe, default_project=default, settled=settled
        )

    async def ask_approval(self, thread: Thread, turn_id: int) -> None:
        """Post the card and remember where it is (the sweeper updates it on expiry)."""
        turn = await self.store.turn(turn_id)
        if turn is None:
            return
        text, blocks = self.card(turn)
        ts = await self.replies.post(thread, text, blocks)
        if ts is None:
            log.warning("could not post the approval card of turn %s", turn_id)
            return
        card = {"channel": thread.channel, "ts": ts, "thread_ts": thread.thread_ts}
        await self.store.update_turn_state(turn_id, {"card": card})
        turn = await self.store.turn(turn_id)
        if turn is not None and turn.outcome == "expired":  # swept before the card was up
            text, blocks = self.card(turn, f":hourglass: {EXPIRED}")
            await self.replies.update(thread.channel, ts, text, blocks)
