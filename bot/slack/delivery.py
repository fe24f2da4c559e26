"""Delivery: one stretch of a turn (a question, or a stopped turn going on) as the thread
sees it: the steps live while it runs, then the answer, an approval card for a write the
model asked for, or a Continue button when the round cap cut it short.

Every post of a turn has an id derived from the turn (see Poster): a stretch resumed by
another process (``resumed``) looks for them in the thread first, so none shows twice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.agent.conversations import Conversations, Reply
from bot.agent.loop import PAUSE, Approver, TextSink
from bot.config import Settings
from bot.messages import Decision, Outcome, ToolCall, TurnRecord
from bot.slack.cards import approval_card, continue_message
from bot.slack.events import Question, Thread
from bot.slack.live import LiveStatus
from bot.slack.poster import Poster

log = logging.getLogger(__name__)

#: runs the turn with the live status as its progress (and text) sink
Work = Callable[[LiveStatus], Awaitable[Reply | None]]
#: told the ts of the live message once it is posted
Posted = Callable[[str], Awaitable[None]]
TITLE_MAX = 60
EXPIRED = "This request expired, so nothing was done. Ask again if it is still needed."
#: the result of a write asked for by someone of another workspace (what the model reads)
NOT_FOR_GUESTS = (
    "Not done: this bot makes changes only for people of its own Slack workspace, and this "
    "request came from someone of another workspace (a shared channel). Someone of the "
    "bot's workspace can ask for it."
)


async def _ask_a_person(call: ToolCall) -> Decision:
    return PAUSE


async def _refuse_a_guest(call: ToolCall) -> Decision:
    return Decision("decline", NOT_FOR_GUESTS)


class Delivery:
    def __init__(self, conversations: Conversations, poster: Poster, settings: Settings):
        self.conversations = conversations
        self.poster = poster
        self.settings = settings
        #: asked before each write: with WRITE_APPROVAL the turn pauses for a person
        self.approver: Approver | None = _ask_a_person if settings.WRITE_APPROVAL else None

    def approver_for(self, external: bool) -> Approver | None:
        """Asked before each write of a turn: someone of another workspace gets none run,
        whatever WRITE_APPROVAL says."""
        return _refuse_a_guest if external else self.approver

    async def working(self, question: Question) -> None:
        await self.poster.working(question)
        if question.pane:
            title = " ".join(question.incoming.text.split())
            await self.poster.title(question.thread, title[:TITLE_MAX] or "New chat")

    async def answer(
        self, question: Question, *, resumed: bool = False, on_posted: Posted | None = None
    ) -> bool:
        """Answer a question; whether its turn was stored (and its reply posted)."""

        async def work(live: LiveStatus) -> Reply:
            return await self.conversations.handle(
                question.incoming,
                approver=self.approver_for(question.external),
                on_progress=live.steps,
                on_text=self._streamed(live),
                resumed=resumed,
            )

        reply = await self.run(
            question.thread, work, pane=question.pane, resumed=resumed, on_posted=on_posted
        )
        return reply is not None and reply.turn_id is not None

    async def resume(
        self,
        thread: Thread,
        turn_id: int,
        decisions: dict[str, Decision] | None = None,
        *,
        resumed: bool = False,
        external: bool = False,
    ) -> Reply | None:
        """Go on with a stopped turn (None: someone else already did); ``external``: for
        someone of another workspace."""

        async def work(live: LiveStatus) -> Reply | None:
            return await self.conversations.resume(
                turn_id,
                decisions,
                approver=self.approver_for(external),
                on_progress=live.steps,
                on_text=self._streamed(live),
                resumed=resumed,
            )

        return await self.run(thread, work, resumed=resumed)

    async def run(
        self,
        thread: Thread,
        work: Work,
        *,
        pane: bool = False,
        resumed: bool = False,
        on_posted: Posted | None = None,
    ) -> Reply | None:
        live = LiveStatus(
            self.poster, thread, self.conversations.describe, pane=pane, on_posted=on_posted
        )
        reply = None
        try:
            reply = await work(live)
        finally:
            streamed = await live.close(keep=reply is not None and reply.ok)
        try:
            if reply is not None:
                await self.post_reply(thread, reply, into=streamed, look_first=resumed)
        finally:
            # after the answer: what the person waits for goes out first
            await live.clear()
        return reply

    def _streamed(self, live: LiveStatus) -> TextSink | None:
        return live.text if self.settings.STREAM_ANSWERS else None

    async def post_reply(
        self, thread: Thread, reply: Reply, into: str | None = None, *, look_first: bool = False
    ) -> None:
        """What the thread gets of a stretch that ended: the answer (``into`` the streamed
        message, if any), an approval card, or the answer and a Continue button after the
        round cap; nothing for an approval that expired."""
        if reply.outcome == Outcome.EXPIRED:
            return
        stopped = reply.outcome in (Outcome.AWAITING_APPROVAL, Outcome.MAX_ROUNDS)
        turn = await self.conversations.turn(reply.turn_id) if stopped and reply.turn_id else None
        if reply.outcome == Outcome.AWAITING_APPROVAL and turn is not None:
            text, blocks = self.card(turn)
            await self._show_card(thread, turn, text, blocks, "card", look_first)
            return
        post_id = f"turn-{reply.turn_id}-{reply.rounds}" if reply.turn_id else None
        await self.poster.answer(thread, reply, into=into, post_id=post_id, look_first=look_first)
        if reply.outcome == Outcome.MAX_ROUNDS and turn is not None:
            text, blocks = continue_message(turn.id or 0, turn.rounds)
            await self._show_card(thread, turn, text, blocks, "continue", look_first)

    def card(self, turn: TurnRecord, decided: str | None = None) -> tuple[str, list]:  # type: ignore[type-arg]
        calls = self.conversations.pending_writes(turn)
        describe, default = self.conversations.describe, self.settings.JIRA_PROJECT
        return approval_card(turn, calls, describe, default_project=default, decided=decided)

    async def close_card(self, turn: TurnRecord, decided: str) -> None:
        """The turn's card (the one recorded, never another message) without its buttons,
        saying what became of it."""
        card = turn.state.card
        if card is None:
            return
        text, blocks = self.card(turn, decided)
        await self.poster.update(card["channel"], card["ts"], text, blocks)

    async def _show_card(
        self,
        thread: Thread,
        turn: TurnRecord,
        text: str,
        blocks: list,
        kind: str,
        look_first: bool,  # type: ignore[type-arg]
    ) -> None:
        """Post the turn's buttons and record where they are (the only message a press may
        edit for the turn)."""
        assert turn.id is not None
        post_id = f"turn-{turn.id}-{turn.rounds}-{kind}"
        ts = await self.poster.post(thread, text, blocks, post_id=post_id, look_first=look_first)
        if ts is None:
            log.warning("could not post the %s of turn %s", kind, turn.id)
            return
        card = {"channel": thread.channel, "ts": ts, "thread_ts": thread.thread_ts or ""}
        shown = await self.conversations.show_card(turn.id, card)
        if shown is not None and shown.outcome == Outcome.EXPIRED:  # swept before it was up
            await self.close_card(shown, f":hourglass: {EXPIRED}")
