"""Conversations: one turn of a channel's session, from the incoming message to the
stored answer, journaled as it goes so that it can be resumed. Every shell (Slack, CLI)
goes through ``handle``, and ``resume`` for a turn that stopped for a person (an approval,
or Continue after the round cap). The caller holds the channel (bot.jobs): turns of one
channel run one at a time."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from bot import telemetry
from bot.agent.limits import PerPerson
from bot.agent.loop import Approver, DoneSink, Hooks, Loop, ProgressSink, TurnResult
from bot.agent.tokens import count_message
from bot.agent.window import INTERRUPTED_RESULT, repair, select_window
from bot.errors import StoreError
from bot.llm.base import TextSink
from bot.messages import (
    Attachment,
    Decision,
    Message,
    Outcome,
    ToolCall,
    TurnRecord,
    TurnState,
    Usage,
    clean_text,
    utcnow,
    with_references,
)
from bot.store.history import HistoryStore
from bot.store.turns import OpenTurn, ReopenedTurn, TurnStore

log = logging.getLogger(__name__)

STORE_FAILED = "I could not reach my database, so I did not answer. Please try again shortly."
APPROVAL_EXPIRED = "This approval request has expired, so nothing was done. Please ask again."
FAILED = "Sorry, something went wrong while I was answering. Please try again."
#: how long a turn going on waits for the tool source (an MCP server) of a pending call
TOOLS_WAIT_S = 10.0
#: turns a person can let go on, and how
STOPPED = (Outcome.AWAITING_APPROVAL, Outcome.MAX_ROUNDS)


@dataclass(frozen=True)
class Incoming:
    """A message for the bot, from whichever shell received it."""

    channel_id: str
    text: str
    user_id: str | None = None
    slack_ts: str | None = None
    #: the files that came with it (the history keeps only a reference to each)
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class Reply:
    """What the shell shows: the answer, or a short message saying what went wrong.

    With ``outcome`` AWAITING_APPROVAL there is no answer yet: ``pending`` holds the writing
    calls a person must approve before ``Conversations.resume`` goes on.
    """

    text: str
    ok: bool
    outcome: Outcome
    turn_id: int | None = None
    pending: tuple[ToolCall, ...] = ()
    #: the turn's rounds so far (its posts are told apart by them)
    rounds: int = 0


class Conversations:
    """Runs turns: the channel's history window, the loop, and the journal."""

    def __init__(
        self,
        turns: TurnStore,
        history: HistoryStore,
        loop: Loop,
        token_budget: int,
        approval_timeout: timedelta = timedelta(days=1),
        per_person: PerPerson | None = None,
    ) -> None:
        self.turns = turns
        self.history = history
        self.loop = loop
        self.token_budget = token_budget
        self.approval_timeout = approval_timeout
        #: new turns a person may have (None: no limit)
        self.per_person = per_person

    async def handle(
        self,
        incoming: Incoming,
        *,
        approver: Approver | None = None,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
        on_done: DoneSink | None = None,
        resumed: bool = False,
    ) -> Reply:
        """Answer one message. ``approver`` is asked before each writing call (none: writes
        run at once); ``on_progress``, ``on_text`` and ``on_done`` are told what the turn
        does, writes and finishes.
        ``resumed``: the message may have been taken on before (a process died answering
        it): its turn, if stored, goes on from its journal, or its stored reply is returned;
        the question is never stored twice. Never raises for model, tool or database
        failures: they become a failed Reply."""
        hooks = Hooks(approver, on_progress, on_text, on_done=on_done)
        with telemetry.turn(incoming.channel_id):
            try:
                if resumed and incoming.slack_ts:
                    found = await self.turns.find(incoming.channel_id, incoming.slack_ts)
                    if found is not None:
                        return await self._found_again(found, hooks)
                return await self._turn(incoming, hooks)
            except StoreError:
                log.exception("turn in %s failed on the database", incoming.channel_id)
                telemetry.turn_failed("database")
                return Reply(STORE_FAILED, ok=False, outcome=Outcome.ERROR)

    async def resume(
        self,
        turn_id: int,
        decisions: dict[str, Decision] | None = None,
        *,
        approver: Approver | None = None,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
        on_done: DoneSink | None = None,
        resumed: bool = False,
    ) -> Reply | None:
        """Go on with a stopped turn: one paused for approval (its pending calls decided
        in ``decisions``) or one that hit the round cap (another MAX_TOOL_ROUNDS). None when
        it is not stopped any more (e.g. a second press) or is unknown. ``resumed``: a
        process died while it went on; it goes on from its journal."""
        hooks = Hooks(approver, on_progress, on_text, on_done=on_done)
        with telemetry.turn(None, turn_id):
            try:
                record = await self.turns.get(turn_id)
                if record is None:
                    return None
                telemetry.turn_began(turn_id, record.channel_id)
                if resumed and record.outcome == Outcome.RUNNING:
                    return await self._go_on_after_crash(record, hooks)
                if record.outcome not in STOPPED:
                    return None
                claimed = await self.turns.claim(turn_id, record.outcome, decisions)
                if claimed is None:
                    return None
                return await self._go_on_stopped(claimed, record.outcome, hooks)
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
        return await self.history.edit_slack_message(channel_id, slack_ts, cleaned, tokens)

    async def delete(self, channel_id: str, slack_ts: str) -> tuple[int, list[TurnRecord]]:
        """A message (``slack_ts``) deleted where it was asked leaves the stored history, and
        a stopped turn it asked expires, its state keeping nothing made of it. How many stored
        messages went, and those turns (their cards come down). Raises StoreError."""
        deleted = await self.history.delete_slack_message(channel_id, slack_ts)
        return deleted, await self.turns.withdraw(channel_id, slack_ts)

    # -- what the shells read and record of a turn ---------------------------------------

    async def turn(self, turn_id: int) -> TurnRecord | None:
        return await self.turns.get(turn_id)

    async def show_card(self, turn_id: int, card: dict[str, str]) -> TurnRecord | None:
        """Record where the turn's buttons are shown; the turn as it is now."""
        return await self.turns.set_card(turn_id, card)

    async def expire_approvals(self) -> list[TurnRecord]:
        """Approval requests unanswered for longer than the timeout expire; returned with
        their state, so the shell can say so where it asked."""
        expired = await self.turns.expire(utcnow() - self.approval_timeout)
        telemetry.turns_expired(len(expired))
        return expired

    def describe(self, call: ToolCall) -> str:
        """What ``call`` does, in words for people ("Looking up TASK-1 in Jira")."""
        return self.loop.registry.describe(call)

    def pending_writes(self, record: TurnRecord) -> list[ToolCall]:
        """The writing calls a paused turn waits on."""
        pending = record.state.pending
        calls = pending.tool_calls if pending is not None else ()
        return [call for call in calls if self.loop.registry.writes(call.name)]

    # -- turns --------------------------------------------------------------------------

    async def _turn(self, incoming: Incoming, hooks: Hooks) -> Reply:
        started = time.perf_counter()
        text = clean_text(with_references(incoming.text, incoming.attachments))
        user = Message.user(text, user_id=incoming.user_id, slack_ts=incoming.slack_ts)
        user = user.with_(tokens=count_message(user))
        record = TurnRecord(
            channel_id=incoming.channel_id,
            user_id=incoming.user_id,
            slack_ts=incoming.slack_ts,
            model=self.loop.model.model,
            api_mode=self.loop.model.api,
        )
        begun = await self.turns.begin(record, user, self.token_budget, INTERRUPTED_RESULT)
        record.id = begun.turn.id
        telemetry.turn_began(record.id)
        hooks = self._journaled(hooks, begun.turn)
        history = select_window(begun.recent, self.token_budget)
        asked = begun.user.with_(attachments=incoming.attachments)  # files: this turn only
        result = await self._refused(incoming) or await self.loop.run(history, asked, hooks)
        return await self._store(begun.turn, record, result, started)

    async def _refused(self, incoming: Incoming) -> TurnResult | None:
        """The result of a new turn its person may not have now (stored, not answered);
        None when it may go on."""
        if self.per_person is None:
            return None
        refused = await self.per_person.refusal(incoming.user_id)
        return None if refused is None else TurnResult(outcome=Outcome.ERROR, error=refused)

    async def _found_again(self, record: TurnRecord, hooks: Hooks) -> Reply:
        """The turn of a message taken on again: it goes on if it was cut short, else its
        reply is what was stored."""
        if record.outcome == Outcome.INTERRUPTED:
            claimed = await self.turns.claim(record.id or 0, Outcome.INTERRUPTED)
            record = claimed or record
        if record.outcome == Outcome.RUNNING:
            return await self._go_on_after_crash(record, hooks)
        return await self._stored_reply(record)

    async def _go_on_stopped(self, record: TurnRecord, stopped: Outcome, hooks: Hooks) -> Reply:
        """A person let a stopped turn go on (claimed: running again)."""
        assert record.id is not None
        paused = stopped == Outcome.AWAITING_APPROVAL
        if paused and self._expired(record):
            record.outcome, record.state = Outcome.EXPIRED, record.state.with_(decisions={})
            await self.turns.finish(OpenTurn(record.id, record.channel_id, None), record, [])
            telemetry.turns_expired(1)
            return Reply(APPROVAL_EXPIRED, ok=False, outcome=Outcome.EXPIRED, turn_id=record.id)
        if paused:
            await self._tools_for(record.state.pending)
        reopened = await self._reopen(record.id)
        prior = _prior(record, None, round_base=0 if paused else record.rounds)
        return await self._go_on(
            reopened,
            reopened.journal,
            record.state.pending if paused else None,
            prior,
            hooks,
        )

    async def _go_on_after_crash(self, record: TurnRecord, hooks: Hooks) -> Reply:
        """A running turn whose process died: on from its journal. Stored rounds are not
        asked again; the unfinished round's reads run again and its writes are looked up
        by their markers (never sent twice)."""
        assert record.id is not None
        log.warning("resuming turn %s in %s from its journal", record.id, record.channel_id)
        reopened = await self._reopen(record.id)
        journal, pending = reopened.journal, record.state.pending
        journaled = {call.id for message in journal for call in message.tool_calls}
        # a turn continued past the round cap counts its rounds from there
        base = record.rounds if record.rounds >= self.loop.max_rounds else 0
        if pending is not None and not {c.id for c in pending.tool_calls} & journaled:
            # approved (or declined), and gone on no further than the claim: not yet sent
            prior = _prior(record, journal, base)
            return await self._go_on(reopened, journal, pending, prior, hooks)
        if journal and journal[-1].tool_calls:
            prior = _prior(record, journal[:-1], base)
            unfinished = journal[-1]
            return await self._go_on(
                reopened, journal[:-1], unfinished, prior, hooks, recovering=True
            )
        return await self._go_on(reopened, journal, None, _prior(record, journal, base), hooks)

    async def _go_on(
        self,
        reopened: ReopenedTurn,
        journal: list[Message],
        unfinished: Message | None,
        prior: TurnResult,
        hooks: Hooks,
        *,
        recovering: bool = False,
    ) -> Reply:
        started = time.perf_counter()
        record = reopened.record
        history = select_window(reopened.before, self.token_budget)
        result = await self.loop.resume(
            history,
            repair(journal),
            unfinished,
            record.state.decisions,
            prior,
            self._journaled(hooks, reopened.turn),
            recovering=recovering,
        )
        return await self._store(reopened.turn, record, result, started, record.latency_ms or 0)

    async def _tools_for(self, pending: Message | None) -> None:
        """A write approved just after a restart may be an MCP server's that is still
        connecting: it gets a moment to (a call of a tool still missing then fails as
        unknown, and the model says so)."""
        registry = self.loop.registry
        if pending is not None and any(c.name not in registry for c in pending.tool_calls):
            await registry.ready(TOOLS_WAIT_S)

    async def _reopen(self, turn_id: int) -> ReopenedTurn:
        reopened = await self.turns.reopen(turn_id, self.token_budget)
        if reopened is None:
            raise StoreError(f"turn {turn_id} is gone")
        return reopened

    def _journaled(self, hooks: Hooks, turn: OpenTurn) -> Hooks:
        async def journal(messages):  # type: ignore[no-untyped-def]
            await self.turns.journal(turn, messages)

        return dataclasses.replace(hooks, journal=journal)

    async def _store(
        self,
        turn: OpenTurn,
        record: TurnRecord,
        result: TurnResult,
        started: float,
        earlier_ms: int = 0,
    ) -> Reply:
        """Store the turn's outcome and the messages not journaled yet."""
        record.rounds = result.rounds
        record.tools_called = result.tools_called
        record.outcome = result.outcome
        record.input_tokens = result.usage.input_tokens
        record.output_tokens = result.usage.output_tokens
        record.latency_ms = earlier_ms + round((time.perf_counter() - started) * 1000)
        record.error = f"{result.error.kind}: {result.error}" if result.error else None
        record.state = TurnState(
            pending=result.pending,
            paused_at=utcnow() if result.pending is not None else None,
            card=record.state.card,
        )
        await self.turns.finish(turn, record, result.messages[result.journaled :])
        telemetry.turn_ended(record, time.perf_counter() - started)
        return self._reply(record, result.answer or "")

    def _reply(self, record: TurnRecord, answer: str) -> Reply:
        """The reply of a turn that ended (``answer``: its final text, if it has one)."""
        ended = {"outcome": record.outcome, "turn_id": record.id, "rounds": record.rounds}
        if record.outcome == Outcome.ERROR:
            return Reply(record.error_message or FAILED, ok=False, **ended)
        if record.outcome == Outcome.EXPIRED:
            return Reply(APPROVAL_EXPIRED, ok=False, **ended)
        if record.outcome == Outcome.AWAITING_APPROVAL:
            return Reply("", ok=True, pending=tuple(self.pending_writes(record)), **ended)
        return Reply(answer or FAILED, ok=bool(answer), **ended)

    async def _stored_reply(self, record: TurnRecord) -> Reply:
        """The reply of a turn that ended before its process could post it."""
        answer = ""
        if record.outcome in (Outcome.ANSWERED, Outcome.TRUNCATED, Outcome.MAX_ROUNDS):
            reopened = await self._reopen(record.id or 0)
            final = reopened.journal[-1] if reopened.journal else None
            answer = final.content or "" if final is not None and final.role == "assistant" else ""
        return self._reply(record, answer)

    def _expired(self, record: TurnRecord) -> bool:
        paused_at = record.state.paused_at
        return paused_at is not None and utcnow() - paused_at > self.approval_timeout


def _prior(record: TurnRecord, done: list[Message] | None, round_base: int) -> TurnResult:
    """What a turn that goes on carries from before: rounds, tools and tokens so far; from
    the messages ``done`` when its record was not stored since (cut short by a crash)."""
    rounds, tools = record.rounds, list(record.tools_called)
    if done is not None:
        calls = [m.tool_calls for m in done if m.tool_calls]
        rounds, tools = len(calls), [call.name for round_ in calls for call in round_]
    return TurnResult(
        outcome=Outcome.RUNNING,
        rounds=rounds,
        tools_called=tools,
        usage=Usage(record.input_tokens, record.output_tokens),
        round_base=round_base,
    )
