"""Conversations: one turn of a channel's session, from the incoming message to the
stored answer. Every shell (Slack, CLI) goes through ``handle`` (and ``resume`` for a turn
that paused for a person's approval)."""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from bot.agent.loop import Approver, Decision, Loop, ProgressSink, TurnResult
from bot.agent.tokens import count_message
from bot.agent.window import select_window
from bot.errors import StoreError
from bot.llm.base import TextSink
from bot.messages import Message, ToolCall, TurnRecord, Usage, iso, parse_iso, utcnow
from bot.store.history import HistoryStore
from bot.tools.base import ToolRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Incoming:
    """A message for the bot, from whichever shell received it."""

    channel_id: str
    text: str
    user_id: str | None = None
    slack_ts: str | None = None


@dataclass(frozen=True)
class Reply:
    """What the shell shows: the answer, or a short message saying what went wrong.

    With ``outcome == "awaiting_approval"`` there is no answer yet: ``pending`` holds the
    writing calls a person must approve before ``Conversations.resume`` goes on.
    """

    text: str
    ok: bool
    outcome: str
    turn_id: int | None = None
    pending: tuple[ToolCall, ...] = ()


#: C0 control characters except tab and newline: PostgreSQL text cannot hold NUL, and the
#: others only garble terminals, logs and the admin page
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")


def clean_text(text: str) -> str:
    """Incoming text as it is stored and sent to the model: CRLF becomes LF, and the other
    C0 control characters but tab and newline are dropped."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


STORE_FAILED = "I could not reach my database, so I did not answer. Please try again shortly."


class Conversations:
    """Runs turns: the channel's lock, its history window, the loop, and storage."""

    def __init__(
        self,
        store: HistoryStore,
        loop: Loop,
        token_budget: int,
        approval_timeout: timedelta = timedelta(days=1),
    ) -> None:
        self.store = store
        self.loop = loop
        self.token_budget = token_budget
        self.approval_timeout = approval_timeout

    async def handle(
        self,
        incoming: Incoming,
        *,
        approver: Approver | None = None,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
        on_begun: Callable[[], None] | None = None,
    ) -> Reply:
        """Answer one message. Never raises for model or tool failures; a database failure
        becomes a failed Reply too. ``approver`` is asked before each writing call (none:
        writes run at once). ``on_begun`` is called once the message is stored and its turn
        begun, just before the model is asked."""
        try:
            async with self.store.channel_lock(incoming.channel_id, incoming.slack_ts):
                return await self._turn(incoming, approver, on_progress, on_text, on_begun)
        except (SQLAlchemyError, OSError, StoreError):
            log.exception("turn in %s failed on the database", incoming.channel_id)
            return Reply(STORE_FAILED, ok=False, outcome="error")

    async def resume(
        self,
        turn_id: int,
        decisions: dict[str, Decision] | None = None,
        *,
        approver: Approver | None = None,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
    ) -> Reply | None:
        """Go on with a stopped turn: one paused for approval (its pending calls decided
        in ``decisions``) or one that hit the round cap (another MAX_TOOL_ROUNDS). None when
        the turn is not stopped any more (e.g. a second press) or is unknown."""
        try:
            stopped = await self.store.turn(turn_id)
            if stopped is None or stopped.outcome not in RESUMABLE or not stopped.state:
                return None
            async with self.store.channel_lock(stopped.channel_id):
                if not await self.store.claim_turn(turn_id, stopped.outcome):
                    return None
                record = await self.store.turn(turn_id)
                assert record is not None and record.state is not None
                if stopped.outcome == "awaiting_approval" and self._expired(record):
                    record.outcome = "expired"
                    await self.store.finish_turn(turn_id, record, [])
                    return Reply(APPROVAL_EXPIRED, ok=False, outcome="expired", turn_id=turn_id)
                paused = stopped.outcome == "awaiting_approval"
                return await self._resume(
                    record, decisions or {}, paused, approver, on_progress, on_text
                )
        except (SQLAlchemyError, OSError, StoreError):
            log.exception("resuming turn %s failed on the database", turn_id)
            return Reply(STORE_FAILED, ok=False, outcome="error", turn_id=turn_id)

    async def edit(self, channel_id: str, slack_ts: str, text: str) -> int:
        """A person edited a message (``slack_ts``) where it was asked: the stored one reads
        ``text`` from now on, cleaned and counted as a new message's would be. How many
        stored messages changed (0: it was never stored)."""
        cleaned = clean_text(text)
        tokens = count_message(Message.user(cleaned))
        async with self.store.channel_lock(channel_id):
            return await self.store.edit_slack_message(channel_id, slack_ts, cleaned, tokens)

    async def delete(self, channel_id: str, slack_ts: str) -> int:
        """A message (``slack_ts``) deleted where it was asked leaves the stored history.
        How many stored messages went."""
        async with self.store.channel_lock(channel_id):
            return await self.store.delete_slack_message(channel_id, slack_ts)

    async def _turn(
        self,
        incoming: Incoming,
        approver: Approver | None,
        on_progress: ProgressSink | None,
        on_text: TextSink | None,
        on_begun: Callable[[], None] | None,
    ) -> Reply:
        started = time.perf_counter()
        channel = incoming.channel_id
        user = Message.user(
            clean_text(incoming.text), user_id=incoming.user_id, slack_ts=incoming.slack_ts
        )
        user = user.with_(tokens=count_message(user))
        record = TurnRecord(
            channel_id=channel,
            user_id=incoming.user_id,
            slack_ts=incoming.slack_ts,
            model=self.loop.model.model,
            api_mode=self.loop.model.api,
        )
        begun = await self.store.begin_turn(record, user, self.token_budget)
        if on_begun is not None:
            on_begun()
        record.id, user = begun.turn_id, begun.user
        history = select_window(begun.recent, self.token_budget)
        kept = _KeepWrites(self.store, self.loop.registry, channel, begun.turn_id)
        run = functools.partial(
            self.loop.run,
            approver=approver,
            on_progress=on_progress,
            on_text=on_text,
            on_round=kept,
        )
        result = await run(history, user)
        if result.error and result.error.kind == "context_length" and not result.messages:
            # the estimate was too generous for this model: once more with a quarter of it
            log.warning("context length exceeded in %s; retrying with less history", channel)
            history = select_window(begun.recent, self.token_budget // 4)
            result = await run(history, user)
        return await self._store(record, result, started, kept=kept.count)

    async def _resume(
        self,
        record: TurnRecord,
        decisions: dict[str, Decision],
        paused: bool,
        approver: Approver | None,
        on_progress: ProgressSink | None,
        on_text: TextSink | None,
    ) -> Reply:
        started = time.perf_counter()
        state = record.state or {}
        prior = TurnResult(
            outcome="running",
            rounds=record.rounds,
            tools_called=list(record.tools_called),
            usage=Usage(record.input_tokens, record.output_tokens),
            # past the round cap, a continued turn gets a fresh allowance of rounds
            round_base=0 if paused else record.rounds,
        )
        assert record.id is not None
        kept = _KeepWrites(self.store, self.loop.registry, record.channel_id, record.id)
        result = await self.loop.resume(
            [Message.from_dict(m) for m in state["conversation"]],
            Message.from_dict(state["pending"]) if paused else None,
            decisions,
            prior,
            approver=approver,
            on_progress=on_progress,
            on_text=on_text,
            on_round=kept,
        )
        return await self._store(record, result, started, record.latency_ms or 0, kept.count)

    async def _store(
        self,
        record: TurnRecord,
        result: TurnResult,
        started: float,
        earlier_ms: int = 0,
        kept: int = 0,
    ) -> Reply:
        """Store the turn's outcome and its messages (but the first ``kept``, stored already)."""
        turn_id = record.id
        assert turn_id is not None
        record.rounds = result.rounds
        record.tools_called = result.tools_called
        record.outcome = result.outcome  # type: ignore[assignment]
        record.input_tokens = result.usage.input_tokens
        record.output_tokens = result.usage.output_tokens
        record.latency_ms = earlier_ms + round((time.perf_counter() - started) * 1000)
        record.error = f"{result.error.kind}: {result.error}" if result.error else None
        state = None
        if result.pending is not None:
            state = {
                "conversation": [m.to_dict() for m in result.conversation],
                "pending": result.pending.to_dict(),
                "paused_at": iso(utcnow()),
            }
        elif result.outcome == "max_rounds":
            state = {"conversation": [m.to_dict() for m in result.conversation]}
        await self.store.finish_turn(turn_id, record, result.messages[kept:], state=state)
        log.info(
            "turn %s in %s: %s, %d rounds, %d+%d tokens, %d ms",
            turn_id,
            record.channel_id,
            record.outcome,
            record.rounds,
            record.input_tokens,
            record.output_tokens,
            record.latency_ms,
        )
        if result.error is not None:
            return Reply(str(result.error), ok=False, outcome="error", turn_id=turn_id)
        if result.pending is not None:
            writes = tuple(
                c for c in result.pending.tool_calls if self.loop.registry.writes(c.name)
            )
            return Reply("", ok=True, outcome=result.outcome, turn_id=turn_id, pending=writes)
        return Reply(result.answer or "", ok=True, outcome=result.outcome, turn_id=turn_id)

    def _expired(self, record: TurnRecord) -> bool:
        paused_at = record.state.get("paused_at") if record.state else None
        if paused_at is None:
            return False
        return utcnow() - parse_iso(paused_at) > self.approval_timeout


class _KeepWrites:
    """A RoundSink: a round that ran a writing tool is stored as soon as it is done (with
    any rounds before it), not with the rest of the turn. A crash later in the turn then
    cannot make the bot forget (and so repeat) what it changed outside, e.g. a new Jira
    issue. Rounds that only read wait for the end of the turn: one transaction fewer."""

    def __init__(
        self, store: HistoryStore, registry: ToolRegistry, channel_id: str, turn_id: int
    ) -> None:
        self.store = store
        self.registry = registry
        self.channel_id = channel_id
        self.turn_id = turn_id
        #: how many of the turn's new messages are stored
        self.count = 0

    async def __call__(self, messages: Sequence[Message]) -> None:
        waiting = list(messages[self.count :])
        if any(self.registry.writes(c.name) for m in waiting for c in m.tool_calls):
            await self.store.append(self.channel_id, self.turn_id, waiting)
            self.count += len(waiting)


APPROVAL_EXPIRED = "This approval request has expired, so nothing was done. Please ask again."
#: stopped turns that a person can let go on
RESUMABLE = ("awaiting_approval", "max_rounds")
