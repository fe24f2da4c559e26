"""Delivery: one run of a turn (a question, or a stopped turn going on) as the thread
sees it: the steps while it runs, then the answer (with feedback buttons under a final
one), an approval card for a write the model asked for, or a Continue button when the
round cap cut it short.

With STREAM_ANSWERS the answer is streamed into the thread as the model writes it, each
tool call a task of that message (AnswerStream), and whatever the stream could not hold (it
was refused, or the answer is longer than one message) is posted after it. Without it, or
where Slack streams nothing (the top level of a DM; a channel stream without the person it
is for), the steps are a live message (LiveStatus) and the answer is posted when done.

Every post of a turn has an id derived from the turn (see Poster; a streamed message
carries its own in the metadata it ends with): a run resumed by another process
(``resumed``) looks for them in the thread first, so none shows twice.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence

from bot.agent.conversations import Conversations, Reply
from bot.agent.observer import TurnObserver
from bot.config import SlackSettings
from bot.messages import Decision, Outcome, ToolCall
from bot.slack.cards import Blocks, approval_card, continue_message, feedback_block
from bot.slack.display import Display
from bot.slack.events import Question, Thread
from bot.slack.files import SlackFiles
from bot.slack.live import LiveStatus
from bot.slack.poster import Poster
from bot.slack.stream import AnswerStream, Recipient
from bot.slack.threads import SlackThreads
from bot.tools.tool import ToolResult
from bot.turn import TurnState

log = logging.getLogger(__name__)


class InThread(TurnObserver):
    """A turn watched from its thread: its steps and text go to ``display``."""

    def __init__(self, display: Display) -> None:
        self.display = display
        self.streams_text = display.streams_text

    async def on_tools_start(self, state: TurnState, calls: Sequence[ToolCall]) -> None:
        await self.display.steps(calls)

    async def on_text(self, state: TurnState, delta: str) -> None:
        await self.display.text(delta)

    async def on_tool_end(self, state: TurnState, call: ToolCall, result: ToolResult) -> None:
        await self.display.done(call, not result.ok)


#: runs the turn, its observer told what it does
Work = Callable[[TurnObserver], Awaitable[Reply | None]]
#: told the ts of the message showing the turn once it is posted ("" once it is the answer)
Posted = Callable[[str], Awaitable[None]]
TITLE_MAX = 60
EXPIRED = "This request expired, so nothing was done. Ask again if it is still needed."


def _feedback(reply: Reply) -> Blocks | None:
    """The feedback buttons under an answer that ends its turn; None under any other."""
    final = reply.ok and reply.outcome.final
    return [feedback_block(reply.turn_id)] if final and reply.turn_id else None


class Delivery:
    def __init__(
        self,
        conversations: Conversations,
        poster: Poster,
        files: SlackFiles,
        settings: SlackSettings,
        threads: SlackThreads | None = None,
        *,
        default_project: str | None,
    ):
        self.conversations = conversations
        self.poster = poster
        self.settings = settings
        self.files = files
        #: JIRA_PROJECT, which an approval card names when the model named none
        self.default_project = default_project
        #: reads the thread around a question (None: not read, THREAD_CONTEXT_TOKENS=0)
        self.threads = threads

    def read_early(self, question: Question) -> None:
        """Start reading the thread of a question just taken on (see SlackThreads)."""
        if self.threads is not None and question.in_thread and question.thread_ts:
            self.threads.read_early(question.channel, question.thread_ts, question.ts)

    async def close(self) -> None:
        """The early thread reads not taken stop."""
        if self.threads is not None:
            await self.threads.close()

    async def working(self, question: Question) -> None:
        await self.poster.add_reaction(question)
        if question.pane:
            title = " ".join(question.incoming.text.split())
            await self.poster.set_title(question.thread, title[:TITLE_MAX] or "New chat")

    async def answer(
        self, question: Question, *, resumed: bool = False, on_posted: Posted | None = None
    ) -> bool:
        """Answer a question; whether its turn was stored (and its reply posted)."""

        async def work(observer: TurnObserver) -> Reply:
            incoming = dataclasses.replace(question.incoming, external=question.external)
            if question.files:
                attachments = await self.files.read(question.files)
                incoming = dataclasses.replace(incoming, attachments=attachments)
            if self.threads is not None and question.in_thread and question.thread_ts:
                context = await self.threads.context(
                    question.channel, question.thread_ts, question.ts
                )
                incoming = dataclasses.replace(incoming, context=context)
            return await self.conversations.ask(incoming, observer, resumed=resumed)

        user_id = question.incoming.user_id
        recipient = None
        if user_id and question.team_id:
            recipient = Recipient(user_id, question.team_id)
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

        async def work(observer: TurnObserver) -> Reply | None:
            return await self.conversations.resume(
                turn_id, decisions, observer, resumed=resumed, external=external
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
        """Run a turn (``work``) and show it in the thread: streamed where Slack takes a
        stream, else a live message of its steps; then its reply."""
        display = self._display(thread, recipient, pane, on_posted)
        await display.start()
        reply = None
        try:
            reply = await work(InThread(display))
        finally:
            try:
                answered = reply is not None and reply.ok and reply.outcome not in _NO_ANSWER
                shown = await display.end(
                    reply.text if reply is not None and answered else None,
                    post_id=_post_id(reply) if reply is not None else None,
                    blocks=_feedback(reply) if reply is not None else None,
                    resumed=resumed,
                )
                if reply is not None:
                    await self.post_reply(
                        thread, reply, into=shown.into, held=shown.held, look_first=resumed
                    )
                await display.tidy(answered)
            finally:
                await display.close()
        return reply

    def _display(
        self, thread: Thread, recipient: Recipient | None, pane: bool, on_posted: Posted | None
    ) -> Display:
        """The turn's stream, where Slack takes one (a reply in a thread, in a channel for
        the person who asked); else a live message of its steps."""
        describe = self.conversations.describe
        in_dm = thread.channel.startswith("D")
        streams = self.settings.STREAM_ANSWERS and thread.thread_ts is not None
        if streams and (recipient is not None or in_dm):
            return AnswerStream(
                self.poster, thread, describe, recipient=recipient, on_started=on_posted
            )
        return LiveStatus(self.poster, thread, describe, pane=pane, on_posted=on_posted)

    async def post_reply(
        self,
        thread: Thread,
        reply: Reply,
        into: str | None = None,
        *,
        held: int = 0,
        look_first: bool = False,
    ) -> None:
        """What the thread gets of a run that ended: the answer (``into`` a message to
        take over, after the ``held`` characters a streamed message holds), an approval
        card, or the answer and a Continue button after the round cap; nothing for an
        approval that expired."""
        if reply.outcome == Outcome.EXPIRED:
            return
        turn = reply.state if reply.outcome.stopped else None
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

    def card(self, turn: TurnState, decided: str | None = None) -> tuple[str, Blocks]:
        calls = self.conversations.interruptions(turn)
        describe, default = self.conversations.describe, self.default_project
        return approval_card(turn, calls, describe, default_project=default, decided=decided)

    async def close_card(self, turn: TurnState, decided: str) -> None:
        """The turn's card (the one recorded, never another message) without its buttons,
        saying what became of it."""
        card = turn.card
        if card is None:
            return
        text, blocks = self.card(turn, decided)
        await self.poster.update(card["channel"], card["ts"], text, blocks)

    async def _show_card(
        self,
        thread: Thread,
        turn: TurnState,
        text: str,
        blocks: Blocks,
        kind: str,
        look_first: bool,
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


#: outcomes whose run ends without an answer to stream
_NO_ANSWER = frozenset({Outcome.AWAITING_APPROVAL, Outcome.EXPIRED})


def _post_id(reply: Reply) -> str | None:
    """The id the turn's answer posts derive from (one per run: its rounds tell them
    apart)."""
    return f"turn-{reply.turn_id}-{reply.rounds}" if reply.turn_id else None
