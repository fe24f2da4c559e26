"""TurnStore: a turn's lifecycle and its journal.

A turn is journaled as it goes: ``begin`` stores the person's message with a running turn;
``journal`` stores the turn's new messages before the tool calls of a round run (the
assistant message that asks for them, with the writes' markers); ``finish`` stores the rest
with the outcome. Whoever resumes a turn (``reopen``) reads what is stored and goes on
from there. Call these with the channel held (bot.jobs): the turn is then the only writer
of its channel, so its messages' positions are known without asking.

    begin --> running --journal*--> finish: answered | truncated | error | max_rounds
                                    finish: awaiting_approval --claim--> running | expired
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.messages import Decision, Message, Outcome, TurnRecord, TurnState, utcnow
from bot.store.db import Engines, store_errors
from bot.store.history import message_from, turn_from
from bot.store.models import MessageRow, TurnRow
from bot.store.window import BEYOND_POSITIONS as BEYOND
from bot.store.window import Window, Windows, read_window, storable

log = logging.getLogger(__name__)

# The statements every turn runs, built once (building one costs more than running it on
# SQLite), on the tables: the ORM's bulk-statement handling is of no use to them
_TURNS = TurnRow.__table__
_MESSAGES = MessageRow.__table__
_MARK_INTERRUPTED = (
    update(_TURNS)
    .where(_TURNS.c.channel_id == bindparam("channel"), _TURNS.c.outcome == Outcome.RUNNING)
    .values(outcome=Outcome.INTERRUPTED, finished_at=bindparam("now"))
)
_INSERT_TURN = insert(_TURNS).returning(_TURNS.c.id)
#: executed with the columns to set, and the turn's id as "turn"
_UPDATE_TURN = update(_TURNS).where(_TURNS.c.id == bindparam("turn"))
_NEWEST_POSITION = (
    select(_MESSAGES.c.position)
    .where(_MESSAGES.c.channel_id == bindparam("channel"))
    .order_by(_MESSAGES.c.position.desc())
    .limit(1)
)
# one multi-row INSERT: the ORM's bulk insert would split the rows by which columns are
# None, and asking for the ids in row order would make SQLite insert them one by one; the
# positions tell the ids apart instead
_INSERT_MESSAGES = insert(_MESSAGES).returning(_MESSAGES.c.position, _MESSAGES.c.id)
#: what a short result costs in a request, about
UNANSWERED_TOKENS = 12


@dataclass
class OpenTurn:
    """A turn being written: its id, its channel, and the position of the channel's newest
    message (where the turn's next one goes after)."""

    id: int
    channel_id: str
    position: int | None


@dataclass(frozen=True)
class BegunTurn:
    """A turn just begun: the stored person's message, and the channel's recent history
    before it (oldest first)."""

    turn: OpenTurn
    user: Message
    recent: list[Message]


@dataclass(frozen=True)
class ReopenedTurn:
    """A turn to go on with: its record, the channel's history before it, and its own
    stored messages (its journal), oldest first."""

    turn: OpenTurn
    record: TurnRecord
    before: list[Message]
    journal: list[Message]


class TurnStore:
    """Turns and their journal. Every method is one short transaction and raises StoreError
    when the database fails."""

    def __init__(self, engines: Engines | AsyncEngine, windows: Windows | None = None) -> None:
        self.engines = Engines.of(engines)
        #: the channels' windows, kept between turns (see bot.store.window)
        self.windows = windows or Windows()

    @store_errors
    async def begin(
        self, record: TurnRecord, user: Message, budget: int, unanswered: str | None = None
    ) -> BegunTurn:
        """Store the person's message and a running turn, after reading the channel's window
        within ``budget`` (one transaction: this runs every turn). A turn of the channel
        still marked running was cut short and nobody resumed it: it is marked interrupted,
        and calls of its that never got a result get ``unanswered`` (if given) as theirs."""
        channel_id = record.channel_id
        deletions = self.windows.deletions
        async with self.engines.writes.begin() as connection:
            interrupted = await connection.execute(
                _MARK_INTERRUPTED, {"channel": channel_id, "now": utcnow()}
            )
            window = await self.windows.take(connection, channel_id, budget)
            if interrupted.rowcount:
                log.warning("%d interrupted turn(s) in %s", interrupted.rowcount, channel_id)
                if unanswered is not None:
                    await _close_journal(connection, channel_id, window, unanswered)
            recent = list(window.messages)
            turn_id = await connection.scalar(_INSERT_TURN, _new_turn(record))
            assert turn_id is not None
            after = window.newest
            turn = OpenTurn(turn_id, channel_id, after)
            (stored,) = await _append(connection, turn, [user])
        window.extend(after, [stored])
        self.windows.keep(channel_id, window, deletions)
        return BegunTurn(turn, stored, recent)

    @store_errors
    async def journal(self, turn: OpenTurn, messages: Sequence[Message]) -> list[Message]:
        """Store messages of the running turn (a round about to run its tool calls, and the
        results of the round before) in one statement."""
        if not messages:
            return []
        deletions = self.windows.deletions
        after = turn.position
        async with self.engines.writes.begin() as connection:
            stored = await _append(connection, turn, messages)
        self.windows.extend(turn.channel_id, after, stored, deletions)
        return stored

    @store_errors
    async def finish(
        self, turn: OpenTurn, record: TurnRecord, messages: Sequence[Message]
    ) -> list[Message]:
        """Store the turn's other messages and its outcome (and state), in one transaction."""
        deletions = self.windows.deletions
        after = turn.position
        async with self.engines.writes.begin() as connection:
            stored = await _append(connection, turn, messages)
            await connection.execute(_UPDATE_TURN, {"turn": turn.id, **_finished(record)})
        self.windows.extend(turn.channel_id, after, stored, deletions)
        return stored

    @store_errors
    async def get(self, turn_id: int) -> TurnRecord | None:
        async with self.engines.reads.connect() as connection:
            row = (await connection.execute(select(_TURNS).where(_TURNS.c.id == turn_id))).first()
            return turn_from(row) if row else None

    @store_errors
    async def find(self, channel_id: str, slack_ts: str) -> TurnRecord | None:
        """The newest turn that answers the person's message ``slack_ts``, if any."""
        async with self.engines.reads.connect() as connection:
            row = (
                await connection.execute(
                    select(_TURNS)
                    .where(_TURNS.c.channel_id == channel_id, _TURNS.c.slack_ts == slack_ts)
                    .order_by(_TURNS.c.id.desc())
                    .limit(1)
                )
            ).first()
            return turn_from(row) if row else None

    @store_errors
    async def reopen(self, turn_id: int, budget: int) -> ReopenedTurn | None:
        """A turn to go on with (paused, or cut short by a crash): its journal and the
        channel's history before it within ``budget``."""
        async with self.engines.writes.begin() as connection:
            row = (await connection.execute(select(_TURNS).where(_TURNS.c.id == turn_id))).first()
            if row is None:
                return None
            rows = (
                await connection.execute(
                    select(_MESSAGES)
                    .where(_MESSAGES.c.turn_id == turn_id)
                    .order_by(_MESSAGES.c.position)
                )
            ).all()
            journal = [message_from(r) for r in rows]
            window = await read_window(
                connection, row.channel_id, budget, before=rows[0].position if rows else BEYOND
            )
            newest = await connection.scalar(_NEWEST_POSITION, {"channel": row.channel_id})
        turn = OpenTurn(turn_id, row.channel_id, newest)
        return ReopenedTurn(turn, turn_from(row), window.messages, journal)

    @store_errors
    async def claim(
        self, turn_id: int, stopped: Outcome, decisions: dict[str, Decision] | None = None
    ) -> TurnRecord | None:
        """Move a stopped turn from ``stopped`` back to running, keeping ``decisions`` in its
        state; None when it is not in that state any more (gone on already, expired)."""
        async with self.engines.writes.begin() as connection:
            row = (
                await connection.execute(
                    select(_TURNS).where(_TURNS.c.id == turn_id).with_for_update()
                )
            ).first()
            if row is None or row.outcome != stopped:
                return None
            record = turn_from(row)
            record.state = record.state.with_(decisions=dict(decisions or {}))
            record.outcome = Outcome.RUNNING
            await connection.execute(
                _UPDATE_TURN,
                {"turn": turn_id, "outcome": Outcome.RUNNING, "state": _state(record.state)},
            )
            return record

    @store_errors
    async def expire(self, paused_before: datetime) -> list[TurnRecord]:
        """Turns waiting for approval since before ``paused_before`` become expired; returns
        them (with their state) so the shell can say so where it asked."""
        waiting = (_TURNS.c.outcome == Outcome.AWAITING_APPROVAL) & (
            _TURNS.c.finished_at < paused_before
        )
        async with self.engines.writes.begin() as connection:
            rows = (await connection.execute(select(_TURNS).where(waiting))).all()
            if not rows:
                return []
            ids = [row.id for row in rows]
            await connection.execute(
                update(_TURNS).where(_TURNS.c.id.in_(ids), waiting).values(outcome=Outcome.EXPIRED)
            )
        expired = [turn_from(row) for row in rows]
        for record in expired:
            record.outcome = Outcome.EXPIRED
        return expired

    @store_errors
    async def set_card(self, turn_id: int, card: dict[str, str]) -> TurnRecord | None:
        """Record where the turn's buttons are shown (see TurnState.card); the turn as it
        is now."""
        async with self.engines.writes.begin() as connection:
            row = (
                await connection.execute(
                    select(_TURNS).where(_TURNS.c.id == turn_id).with_for_update()
                )
            ).first()
            if row is None:
                return None
            record = turn_from(row)
            record.state = record.state.with_(card=dict(card))
            await connection.execute(_UPDATE_TURN, {"turn": turn_id, "state": _state(record.state)})
            return record


async def _append(
    connection: AsyncConnection, turn: OpenTurn, messages: Sequence[Message]
) -> list[Message]:
    """Insert ``messages`` after the channel's newest (``turn.position``), which moves on."""
    if not messages:
        return []
    if turn.position is None:
        turn.position = await connection.scalar(_NEWEST_POSITION, {"channel": turn.channel_id})
    position = turn.position or 0
    now = utcnow()
    stored = [
        message.with_(turn_id=turn.id, created_at=message.created_at or now) for message in messages
    ]
    rows = [
        {
            "channel_id": turn.channel_id,
            "position": position + offset,
            "turn_id": turn.id,
            "role": message.role,
            "content": storable(message.content),
            "tool_calls": [c.to_stored() for c in message.tool_calls] or None,
            "tool_call_id": message.tool_call_id,
            "tool_name": message.name,
            "user_id": message.user_id,
            "slack_ts": message.slack_ts,
            "tokens": message.tokens,
            "created_at": message.created_at,
        }
        for offset, message in enumerate(stored, start=1)
    ]
    ids = dict((await connection.execute(_INSERT_MESSAGES, rows)).all())
    turn.position = position + len(stored)
    return [
        message.with_(id=ids[position + offset]) for offset, message in enumerate(stored, start=1)
    ]


async def _close_journal(
    connection: AsyncConnection, channel_id: str, window: Window, unanswered: str
) -> None:
    """The channel's newest message calls tools that never got a result (its turn was cut
    short): each gets ``unanswered`` as its result, so the stored history stays paired."""
    last = window.messages[-1] if window.messages else None
    if last is None or not last.tool_calls or last.turn_id is None:
        return
    results = [
        Message.tool_result(call, unanswered).with_(tokens=UNANSWERED_TOKENS)
        for call in last.tool_calls
    ]
    after = window.newest
    stored = await _append(connection, OpenTurn(last.turn_id, channel_id, after), results)
    window.extend(after, stored)


def _new_turn(record: TurnRecord) -> dict[str, Any]:
    return {
        "channel_id": record.channel_id,
        "user_id": record.user_id,
        "slack_ts": record.slack_ts,
        "outcome": Outcome.RUNNING,
        "tools_called": [],
        "model": record.model,
        "api_mode": record.api_mode,
        "started_at": record.started_at or utcnow(),
    }


def _finished(record: TurnRecord) -> dict[str, Any]:
    return {
        "rounds": record.rounds,
        "tools_called": list(record.tools_called),
        "outcome": record.outcome,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "latency_ms": record.latency_ms,
        "model": record.model,
        "api_mode": record.api_mode,
        "error": record.error,
        "state": _state(record.state),
        "finished_at": utcnow(),
    }


def _state(state: TurnState) -> dict[str, Any] | None:
    return state.to_dict() or None
