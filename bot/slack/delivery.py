"""Delivery: one stretch of a turn (a question, or a stopped turn going on) as the thread
sees it: the steps while it runs, then the answer (with feedback buttons under a final
one), an approval card for a write the model asked for, or a Continue button when the
round cap cut it short.

With STREAM_ANSWERS the answer is streamed into the thread as the model writes it, each
tool call a task of that message (AnswerStream), and whatever the stream could not hold (it
was refused, or the answer is longer than one message) is posted after it. Without it, or
where Slack streams nothing (the top level of a DM; a channel stream without the person it
is for), the steps are a live message (LiveStatus) and the answer is posted when done.

Every post of a turn has an id derived from the turn (see Poster; a streamed message
carries its own in the metadata it ends with): a stretch resumed by another process
(``resumed``) looks for them in the thread first, so none shows twice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.agent.conversations import Conversations, Reply
from bot.agent.loop import PAUSE, Approver, DoneSink, ProgressSink
from bot.config import SlackSettings
from bot.llm.base import TextSink
from bot.messages import Decision, Outcome, ToolCall, TurnRecord
from bot.slack.cards import approval_card, continue_message, feedback_block
from bot.slack.events import Question, Thread
from bot.slack.files import SlackFiles
from bot.slack.live import LiveStatus
from bot.slack.poster import Poster
from bot.slack.stream import AnswerStream, Recipient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sinks:
    """What a running turn tells the thread."""

    on_progress: ProgressSink
    on_text: TextSink | None = None
    on_done: DoneSink | None = None


#: runs the turn, telling the thread what it does
Work = Callable[[Sinks], Awaitable[Reply | None]]
#: told the ts of the message showing the turn once it is posted ("" once it is the answer)
Posted = Callable[[str], Awaitable[None]]
TITLE_MAX = 60
#: the thread's status while a streamed answer is on its way (Slack clears it at the reply)
THINKING = "is thinking…"
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


def _feedback(reply: Reply) -> list | None:  # type: ignore[type-arg]
    """The feedback buttons under an answer that ends its turn; None under any other."""
    final = reply.ok and reply.outcome in (Outcome.ANSWERED, Outcome.TRUNCATED)
    return [feedback_block(reply.turn_id)] if final and reply.turn_id else None


class Delivery:
    def __init__(
        self,
        conversations: Conversations,
        poster: Poster,
        files: SlackFiles,
        settings: SlackSettings,
        *,
        default_project: str | None,
    ):
        self.conversations = conversations
        self.poster = poster
        self.settings = settings
        self.files = files
        #: JIRA_PROJECT, which an approval card names when the model named none
        self.default_project = default_project
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

        async def work(sinks: Sinks) -> Reply:
            incoming = question.incoming
            if question.files:
                attachments = await self.files.read(question.files)
                incoming = dataclasses.replace(incoming, attachments=attachments)
            return await self.conversations.handle(
                incoming,
                approver=self.approver_for(question.external),
                on_progress=sinks.on_progress,
                on_text=sinks.on_text,
                on_done=sinks.on_done,
                resumed=resumed,
            )

        incoming = question.incoming
        recipient = None
        if incoming.user_id and question.team_id:
            recipient = Recipient(incoming.user_id, question.team_id)
        reply = await self.run(
            question.thread,
            work,
            pane=question.pane,
            resumed=resumed,
            on_posted=on_posted,
            recipient=recipient,
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
        recipient: Recipient | None = None,
    ) -> Reply | None:
        """Go on with a stopped turn (None: someone else already did); ``external``: for
        someone of another workspace; ``recipient``: who its answer is for (a channel's
        stream needs them)."""

        async def work(sinks: Sinks) -> Reply | None:
            return await self.conversations.resume(
                turn_id,
                decisions,
                approver=self.approver_for(external),
                on_progress=sinks.on_progress,
                on_text=sinks.on_text,
                on_done=sinks.on_done,
                resumed=resumed,
            )

        return await self.run(thread, work, resumed=resumed, recipient=recipient)

    async def run(
        self,
        thread: Thread,
        work: Work,
        *,
        pane: bool = False,
        resumed: bool = False,
        on_posted: Posted | None = None,
        recipient: Recipient | None = None,
    ) -> Reply | None:
        stream = self._stream(thread, recipient, on_posted)
        if stream is None:
            return await self._run_live(thread, work, pane, resumed, on_posted)
        await self.poster.status(thread, THINKING)
        reply = None
        try:
            reply = await work(Sinks(stream.steps, stream.text, stream.done))
        finally:
            try:
                await self._end_stream(thread, stream, reply, resumed, on_posted)
            finally:
                await self.poster.status(thread, "")
        return reply

    def _stream(
        self, thread: Thread, recipient: Recipient | None, on_posted: Posted | None
    ) -> AnswerStream | None:
        """The turn's stream, where Slack takes one: a reply in a thread, in a channel for
        the person who asked."""
        in_dm = thread.channel.startswith("D")
        if not self.settings.STREAM_ANSWERS or thread.thread_ts is None:
            return None
        if recipient is None and not in_dm:
            return None
        describe = self.conversations.describe
        return AnswerStream(
            self.poster.client, thread, describe, recipient=recipient, on_started=on_posted
        )

    async def _run_live(
        self, thread: Thread, work: Work, pane: bool, resumed: bool, on_posted: Posted | None
    ) -> Reply | None:
        live = LiveStatus(
            self.poster, thread, self.conversations.describe, pane=pane, on_posted=on_posted
        )
        reply = None
        try:
            reply = await work(Sinks(live.steps))
        finally:
            await live.close()
        try:
            if reply is not None:
                await self.post_reply(thread, reply, look_first=resumed)
        finally:
            # after the answer: what the person waits for goes out first
            await live.clear()
        return reply

    async def _end_stream(
        self,
        thread: Thread,
        stream: AnswerStream,
        reply: Reply | None,
        resumed: bool,
        on_posted: Posted | None,
    ) -> None:
        """The stream ends with the answer, and what it could not hold is posted after it;
        a turn without an answer (yet) leaves no stream behind."""
        answered = reply is not None and reply.ok and reply.outcome not in _NO_ANSWER
        held = None
        # a stretch resumed without a word streamed may have posted its answer before
        if reply is not None and answered and not (resumed and stream.ts is None):
            # the buttons go under the streamed message (an answer longer than it goes on
            # in posts after it)
            held = await stream.finish(reply.text, post_id=_post_id(reply), blocks=_feedback(reply))
        else:
            await stream.finish(None)
        if reply is not None:
            into = stream.ts if held is None and answered else None
            await self.post_reply(thread, reply, into=into, held=held or 0, look_first=resumed)
        if stream.ts is None:
            return
        if held is not None or answered:  # the message is (or was taken over by) the answer
            if on_posted is not None:
                await on_posted("")
        else:  # after the card or the failure: what the person waits for goes out first
            await self.poster.delete(thread.channel, stream.ts)

    async def post_reply(
        self,
        thread: Thread,
        reply: Reply,
        into: str | None = None,
        *,
        held: int = 0,
        look_first: bool = False,
    ) -> None:
        """What the thread gets of a stretch that ended: the answer (``into`` a message to
        take over, after the ``held`` characters a streamed message holds), an approval
        card, or the answer and a Continue button after the round cap; nothing for an
        approval that expired."""
        if reply.outcome == Outcome.EXPIRED:
            return
        stopped = reply.outcome in (Outcome.AWAITING_APPROVAL, Outcome.MAX_ROUNDS)
        turn = await self.conversations.turn(reply.turn_id) if stopped and reply.turn_id else None
        if reply.outcome == Outcome.AWAITING_APPROVAL and turn is not None:
            text, blocks = self.card(turn)
            await self._show_card(thread, turn, text, blocks, "card", look_first)
            return
        if not held or held < len(reply.text):
            await self.poster.answer(
                thread,
                reply,
                into=into,
                post_id=_post_id(reply),
                look_first=look_first,
                held=held,
                footer=None if held else _feedback(reply),
            )
        if reply.outcome == Outcome.MAX_ROUNDS and turn is not None:
            text, blocks = continue_message(turn.id or 0, turn.rounds)
            await self._show_card(thread, turn, text, blocks, "continue", look_first)

    def card(self, turn: TurnRecord, decided: str | None = None) -> tuple[str, list]:  # type: ignore[type-arg]
        calls = self.conversations.pending_writes(turn)
        describe, default = self.conversations.describe, self.default_project
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


#: outcomes whose stretch ends without an answer to stream
_NO_ANSWER = frozenset({Outcome.AWAITING_APPROVAL, Outcome.EXPIRED})


def _post_id(reply: Reply) -> str | None:
    """The id the turn's answer posts derive from (one per stretch: its rounds tell them
    apart)."""
    return f"turn-{reply.turn_id}-{reply.rounds}" if reply.turn_id else None
