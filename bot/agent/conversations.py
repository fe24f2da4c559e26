"""Conversations: one turn of a channel's session, from the incoming message to the
stored answer, journaled as it goes so that it can go on. Every shell (Slack, CLI) asks
through ``ask``, and goes on with a stopped turn through ``resume`` (after an approval, or
Continue after the round cap). Either way a turn is one TurnState: begun or loaded, given
what its requests carry of the past (bot.agent.memory), run by the loop, stored; the
result carries it, with its interruptions. The caller holds the channel (bot.jobs): turns
of one channel run one at a time. Its parts are given by bot.wiring."""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from bot import telemetry
from bot.agent.limits import PerPerson
from bot.agent.loop import Loop
from bot.agent.memory import Memory
from bot.agent.observer import UNOBSERVED, TurnObserver
from bot.agent.threads import Threads
from bot.agent.tokens import count_message
from bot.context import Context
from bot.errors import StoreError, TurnRefused
from bot.messages import (
    Attachment,
    Decision,
    Message,
    Outcome,
    ToolCall,
    clean_text,
    utcnow,
)
from bot.store.history import HistoryStore
from bot.store.turns import TurnStore
from bot.turn import TurnState, turn_channel

log = logging.getLogger(__name__)

STORE_FAILED = "I could not reach my database, so I did not answer. Please try again shortly."
APPROVAL_EXPIRED = "This approval request has expired, so nothing was done. Please ask again."
FAILED = "Sorry, something went wrong while I was answering. Please try again."


@dataclass(frozen=True)
class Incoming:
    """A message for the bot, from whichever shell received it."""

    channel_id: str
    text: str
    user_id: str | None = None
    slack_ts: str | None = None
    #: the files that came with it (the history keeps only a reference to each)
    attachments: tuple[Attachment, ...] = ()
    #: the messages of the thread it was asked in, oldest first (material, never
    #: instructions: they go in the person's message, quoted and attributed)
    context: Context = field(default_factory=Context)
    #: asked by someone of another workspace (a shared channel): no write runs for them
    external: bool = False


@dataclass(frozen=True)
class Reply:
    """The result of a run of a turn: what the shell shows (the answer, or a short message
    saying what went wrong), and the turn as the run left it (``state``; None when it could
    not be stored).

    With ``outcome`` AWAITING_APPROVAL there is no answer yet: ``interruptions`` holds the
    writing calls a person must approve or reject before ``Conversations.resume`` goes on.
    """

    text: str
    ok: bool
    outcome: Outcome
    turn_id: int | None = None
    interruptions: tuple[ToolCall, ...] = ()
    #: the turn's rounds so far (its posts are told apart by them)
    rounds: int = 0
    state: TurnState | None = field(default=None, repr=False)


class Conversations:
    """Runs turns: what they carry of the past, the loop, and the journal."""

    def __init__(
        self,
        turns: TurnStore,
        history: HistoryStore,
        loop: Loop,
        memory: Memory,
        threads: Threads,
        *,
        per_person: PerPerson | None = None,
        approval_timeout: timedelta = timedelta(days=1),
    ) -> None:
        self.turns = turns
        #: the stored history, changed from outside a turn (Slack's edits and deletions)
        self.history = history
        self.loop = loop
        #: what a turn's requests carry of the past
        self.memory = memory
        #: the stored conversation around questions asked in threads
        self.threads = threads
        #: new turns a person may have (None: no limit)
        self.per_person = per_person
        self.approval_timeout = approval_timeout

    async def ask(
        self, incoming: Incoming, observer: TurnObserver = UNOBSERVED, *, resumed: bool = False
    ) -> Reply:
        """Answer one message, ``observer`` told what the turn does. ``resumed``: the
        message may have been taken on before (a process died answering it): its turn, if
        stored, goes on from its journal, or its stored reply is returned; the question is
        never stored twice. Never raises for model, tool or database failures: they become
        a failed Reply."""
        # the turn is one value from here on; its question as the shell gave it, which
        # the memory makes what is stored and sent (bot.agent.memory)
        asked = Message(
            "user",
            incoming.text,
            user_id=incoming.user_id,
            slack_ts=incoming.slack_ts,
            attachments=incoming.attachments,
            context=incoming.context,
        )
        state = TurnState(
            channel_id=incoming.channel_id,
            user_id=incoming.user_id,
            slack_ts=incoming.slack_ts,
            model=self.loop.model.model,
            api_mode=self.loop.model.api,
            messages=[asked],
            external=incoming.external,
        )
        with telemetry.turn(state.channel_id):
            try:
                if resumed and state.slack_ts:
                    found = await self.turns.find(
                        state.channel_id, state.slack_ts, self.memory.budget
                    )
                    if found is not None:
                        found.external = state.external
                        return await self._found_again(found, observer)
                return await self._new(state, observer)
            except StoreError:
                log.exception("turn in %s failed on the database", state.channel_id)
                telemetry.turn_failed("database")
                return Reply(STORE_FAILED, ok=False, outcome=Outcome.ERROR)

    async def resume(
        self,
        turn_id: int,
        decisions: dict[str, Decision] | None = None,
        observer: TurnObserver = UNOBSERVED,
        *,
        resumed: bool = False,
        external: bool = False,
    ) -> Reply | None:
        """Go on with a stopped turn: one paused for approval (its interruptions decided
        in ``decisions``) or one that hit the round cap (another MAX_TOOL_ROUNDS). None when
        it is not stopped any more (e.g. a second press) or is unknown. ``resumed``: a
        process died while it went on; it goes on from its journal. ``external``: it goes
        on for someone of another workspace."""
        with telemetry.turn(None, turn_id):
            try:
                state = await self.turns.load(turn_id, self.memory.budget)
                if state is None:
                    return None
                state.external = external
                telemetry.turn_began(turn_id, state.channel_id)
                stopped = state.outcome
                if resumed and stopped == Outcome.RUNNING:
                    return await self._go_on(state, observer)
                if not stopped.stopped or not await self._claim(state, decisions):
                    return None
                if stopped == Outcome.AWAITING_APPROVAL and self._expired(state):
                    return await self._expire(state)
                return await self._go_on(state, observer, stopped=stopped)
            except StoreError:
                log.exception("resuming turn %s failed on the database", turn_id)
                telemetry.turn_failed("database")
                return Reply(STORE_FAILED, ok=False, outcome=Outcome.ERROR, turn_id=turn_id)

    async def edit(self, channel_id: str, slack_ts: str, text: str) -> int:
        """A person edited a message (``slack_ts``) where it was asked: the stored one reads
        ``text`` from now on, cleaned and counted as a new message's would be. How many
        stored messages changed (0: it was never stored). Raises StoreError."""
        cleaned = clean_text(text)
        tokens = count_message(Message.user(cleaned))
        edited = await self.history.edit_slack_message(channel_id, slack_ts, cleaned, tokens)
        return edited + await self.threads.follow_edit(channel_id, slack_ts, cleaned)

    async def delete(self, channel_id: str, slack_ts: str) -> tuple[int, list[TurnState]]:
        """A message (``slack_ts``) deleted where it was asked leaves the stored history, and
        a stopped turn it asked expires, its state keeping nothing made of it. How many stored
        messages went, and those turns (their cards come down). Raises StoreError."""
        deleted = await self.history.delete_slack_message(channel_id, slack_ts)
        deleted += await self.threads.follow_deletion(channel_id, slack_ts)
        return deleted, await self.turns.withdraw(channel_id, slack_ts)

    # -- what the shells read and record of a turn ---------------------------------------

    async def turn(self, turn_id: int) -> TurnState | None:
        return await self.turns.get(turn_id)

    async def show_card(self, turn_id: int, card: dict[str, str]) -> TurnState | None:
        """Record where the turn's buttons are shown; the turn as it is now."""
        return await self.turns.set_card(turn_id, card)

    async def expire_approvals(self) -> list[TurnState]:
        """Approval requests unanswered for longer than the timeout expire; returned with
        their state, so the shell can say so where it asked."""
        expired = await self.turns.expire(utcnow() - self.approval_timeout)
        telemetry.turns_expired(len(expired))
        return expired

    def describe(self, call: ToolCall) -> str:
        """What ``call`` does, in words for people ("Looking up TASK-1 in Jira")."""
        return self.loop.registry.describe(call)

    def interruptions(self, record: TurnState) -> list[ToolCall]:
        """The writing calls a paused turn waits on: its interruptions, each to be approved or
        rejected."""
        pending = record.pending
        calls = pending.tool_calls if pending is not None else ()
        return [call for call in calls if self.loop.registry.writes(call.name)]

    # -- turns --------------------------------------------------------------------------

    async def _new(self, state: TurnState, observer: TurnObserver) -> Reply:
        started = time.perf_counter()
        try:
            if self.per_person is not None:
                await self.per_person.admit(state.user_id)
        except TurnRefused as refused:  # stored, not answered
            state.fail(refused)
        await self.memory.prepare(state)
        telemetry.turn_began(state.id)
        if state.outcome == Outcome.ERROR:
            return await self._finish(state, observer, started)
        return await self._run(state, observer, started)

    async def _found_again(self, found: TurnState, observer: TurnObserver) -> Reply:
        """The turn of a message taken on again: it goes on if it was cut short, else its
        reply is what was stored."""
        if found.outcome == Outcome.INTERRUPTED:
            await self._claim(found)
        if found.outcome == Outcome.RUNNING:
            return await self._go_on(found, observer)
        return self._stored_reply(found)

    async def _claim(self, state: TurnState, decisions: dict[str, Decision] | None = None) -> bool:
        """Take a stopped (or interrupted) turn on: running again, with ``decisions``; False
        when someone else did first."""
        assert state.id is not None
        claimed = await self.turns.claim(state.id, state.outcome, decisions)
        if claimed is not None:
            state.outcome, state.decisions = claimed.outcome, claimed.decisions
        return claimed is not None

    async def _go_on(
        self, state: TurnState, observer: TurnObserver, *, stopped: Outcome | None = None
    ) -> Reply:
        """Go on with a loaded turn: one a person let go on (``stopped``: what it was), or
        one whose process died while it ran (``stopped`` None)."""
        started = time.perf_counter()
        if stopped is None:
            log.warning("resuming turn %s in %s from its journal", state.id, state.channel_id)
            self._recover(state)
        elif stopped == Outcome.MAX_ROUNDS:
            state.pending, state.round_base = None, state.rounds
        await self.memory.prepare(state)
        return await self._run(state, observer, started, earlier_ms=state.latency_ms or 0)

    def _recover(self, state: TurnState) -> None:
        """A turn cut short by a crash goes on from its journal: stored rounds are not asked
        again; the unfinished round's reads run again and its writes are looked up by their
        markers (never sent twice). Its rounds and tools are counted from the journal."""
        journaled = {call.id for message in state.messages for call in message.tool_calls}
        pending = state.pending
        if pending is not None and not {c.id for c in pending.tool_calls} & journaled:
            done = state.messages  # approved (or declined), and not yet sent
        elif state.messages and state.messages[-1].tool_calls:
            state.pending, state.recovering = state.messages[-1], True
            done = state.messages[:-1]
        else:
            state.pending, done = None, state.messages
        # a turn continued past the round cap counts its rounds from there
        state.round_base = state.rounds if state.rounds >= self.loop.max_rounds else 0
        calls = [call.name for message in done for call in message.tool_calls]
        state.rounds = sum(1 for message in done if message.tool_calls)
        state.tools_called = calls

    async def _run(
        self, state: TurnState, observer: TurnObserver, started: float, earlier_ms: int = 0
    ) -> Reply:
        with turn_channel(state.channel_id, state.user_id):
            state = await self.loop.run(state, observer, self.turns.save)
        return await self._finish(state, observer, started, earlier_ms)

    async def _finish(
        self, state: TurnState, observer: TurnObserver, started: float, earlier_ms: int = 0
    ) -> Reply:
        """Store where the turn stands and the messages not stored yet."""
        state.latency_ms = earlier_ms + round((time.perf_counter() - started) * 1000)
        state.decisions = {}
        state.paused_at = utcnow() if state.pending is not None else None
        await self.turns.finish(state)
        telemetry.turn_ended(state, time.perf_counter() - started)
        await observer.on_end(state)
        return self._reply(state)

    async def _expire(self, state: TurnState) -> Reply:
        """An approval pressed after the timeout: nothing runs."""
        state.outcome, state.decisions = Outcome.EXPIRED, {}
        await self.turns.finish(state)
        telemetry.turns_expired(1)
        return self._reply(state)

    def _reply(self, state: TurnState) -> Reply:
        """The result of a run that ended."""
        ended = functools.partial(
            Reply, outcome=state.outcome, turn_id=state.id, rounds=state.rounds, state=state
        )
        if state.outcome == Outcome.ERROR:
            return ended(state.error_message or FAILED, ok=False)
        if state.outcome == Outcome.EXPIRED:
            return ended(APPROVAL_EXPIRED, ok=False)
        if state.outcome == Outcome.AWAITING_APPROVAL:
            return ended("", ok=True, interruptions=tuple(self.interruptions(state)))
        answer = state.answer or ""
        return ended(answer or FAILED, ok=bool(answer))

    def _stored_reply(self, found: TurnState) -> Reply:
        """The reply of a turn that ended before its process could post it."""
        final = found.messages[-1] if found.messages else None
        if found.outcome.answered and final is not None and final.role == "assistant":
            found.answer = final.content
        return self._reply(found)

    def _expired(self, state: TurnState) -> bool:
        paused_at = state.paused_at
        return paused_at is not None and utcnow() - paused_at > self.approval_timeout
