"""TurnStore: a turn's lifecycle and its journal.

A turn (bot.turn.TurnState) is journaled as it goes: ``begin`` stores the person's message
with a running turn; ``save`` stores the turn's new messages before the tool calls of a
round run (the assistant message that asks for them, with the writes' markers); ``finish``
stores the rest with the outcome. Whoever goes on with a turn ``load``s it and goes on from
there. Call these with the channel held (bot.jobs): the turn is then the only writer
of its channel, so its messages' positions are known without asking.

    begin --> running --journal*--> finish: answered | truncated | error | max_rounds
                                    finish: awaiting_approval --claim--> running | expired
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, literal_column, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.channels import ChannelSettings
from bot.messages import Decision, Message, Outcome, Summary, utcnow
from bot.store.channels import SETTINGS
from bot.store.db import Engines, store_errors
from bot.store.group_commit import GroupCommit
from bot.store.history import message_from, turn_from
from bot.store.journal import (
    INSERT_TURN,
    MARK_INTERRUPTED,
    MESSAGES,
    NEWEST_POSITION,
    TURNS,
    UPDATE_TURN,
    OpenTurn,
    append,
    append_all,
    append_finishing,
    close_journal,
    finished,
    insert_begun,
    new_turn,
)
from bot.store.summaries import SUMMARIES, summary_from
from bot.store.window import BEYOND_POSITIONS as BEYOND
from bot.store.window import Window, Windows, read_window, window_of
from bot.turn import TurnState

log = logging.getLogger(__name__)


class TurnStore:
    """Turns and their journal. Every method is one short transaction and raises StoreError
    when the database fails. The writes are synchronous Core run by the engines (see
    bot.store.db); the channels' kept windows are touched on the event loop's thread only."""

    def __init__(self, engines: Engines | AsyncEngine, windows: Windows | None = None) -> None:
        self.engines = Engines.of(engines)
        #: the channels' windows, kept between turns (see bot.store.window)
        self.windows = windows or Windows()
        self._journaling = GroupCommit(self._journal_all)

    @store_errors
    async def begin(self, state: TurnState, budget: int, unanswered: str | None = None) -> None:
        """Store a new turn (running) and its question (``state.messages[0]``), after
        reading the channel's recent history within ``budget`` into ``state.history``, and
        its settings and newest summary (one transaction: this runs every turn). A turn of
        the channel still marked running was cut short and nobody resumed it: it is marked
        interrupted, and calls of its that never got a result get ``unanswered`` (if given)
        as theirs."""
        channel_id, user = state.channel_id, state.messages[0]
        kept = self.windows.take_out(channel_id)

        def work(connection: Connection) -> tuple[Window, OpenTurn, Message, Beside]:
            window, beside = window_of(connection, channel_id, budget, kept, BESIDE)
            _interrupted(connection, channel_id, window, unanswered)
            turn_id = connection.scalar(INSERT_TURN, new_turn(state))
            assert turn_id is not None
            turn = OpenTurn(turn_id, channel_id, window.newest)
            (stored,) = append(connection, turn, [user])
            return window, turn, stored, _beside_of(beside)

        def in_one(
            connection: Connection,
        ) -> tuple[Window, OpenTurn, Message, Beside] | None:
            # PostgreSQL (see bot.store.journal): one statement that checks the kept window,
            # stores the turn and reads the channel's settings and newest summary; else the
            # window read, then one statement. The channel is held, so only a deletion can
            # come between the two, as it can between two statements of a READ COMMITTED
            # transaction (the deletion drops the kept window). A channel with a turn cut
            # short needs a transaction (None: ``work``)
            if kept is not None and kept.budget == budget and not _cut_short(kept):
                begun = insert_begun(
                    connection, state, channel_id, kept, user, BESIDE, checked=True
                )
                if begun is not None:
                    return kept, begun[0], begun[1], _beside_of(begun[2])
            window = read_window(connection, channel_id, budget)
            if _cut_short(window):
                return None
            begun = insert_begun(connection, state, channel_id, window, user, BESIDE, checked=False)
            assert begun is not None  # an unchecked INSERT always inserts
            return window, begun[0], begun[1], _beside_of(begun[2])

        window, turn, stored, read = await self.engines.transaction(work, one_statement=in_one)
        state.channel, state.summary = read
        state.history = list(window.messages)
        window.extend(window.newest, [stored])
        self.windows.keep(channel_id, window)
        state.id, state.position = turn.id, turn.position
        state.messages[0], state.saved = stored, 1

    @store_errors
    async def save(self, state: TurnState) -> None:
        """Store the running turn's new messages (a round about to run its tool calls, and
        the results of the round before) in one statement: its journal.

        The journals of turns that come while one is being written go in together, in one
        statement (group commit): a burst's tool rounds journal at once."""
        # speed device: see bench/README.md, "group commit"
        messages = state.unsaved
        if not messages:
            return
        turn = _open(state)
        after = turn.position
        stored = await self._journaling.submit((turn, messages))
        self.windows.extend(turn.channel_id, after, stored)
        _saved(state, turn, stored)

    async def _journal_all(
        self, appends: list[tuple[OpenTurn, Sequence[Message]]]
    ) -> Sequence[list[Message] | Exception]:
        if len(appends) > 1:
            positions = [turn.position for turn, _ in appends]
            try:
                return await self.engines.statement(lambda c: append_all(c, appends))
            except SQLAlchemyError:  # one at fault fails only itself: each on its own
                for (turn, _), position in zip(appends, positions, strict=True):
                    turn.position = position
        outcomes: list[list[Message] | Exception] = []
        for turn, messages in appends:
            try:
                one = await self.engines.statement(
                    functools.partial(append, turn=turn, messages=messages)
                )
                outcomes.append(one)
            except SQLAlchemyError as exc:
                outcomes.append(exc)
        return outcomes

    @store_errors
    async def finish(self, state: TurnState) -> None:
        """Store the turn's messages not stored yet and where it stands, in one transaction."""
        turn, messages = _open(state), state.unsaved
        after = turn.position
        values = finished(state)

        def work(connection: Connection) -> list[Message]:
            stored = append(connection, turn, messages)
            connection.execute(UPDATE_TURN, {"turn": turn.id, **values})
            return stored

        def in_one(connection: Connection) -> list[Message]:  # PostgreSQL: bot.store.journal
            return append_finishing(connection, turn, messages, values)

        stored = await self.engines.transaction(work, one_statement=in_one)
        self.windows.extend(turn.channel_id, after, stored)
        _saved(state, turn, stored)

    @store_errors
    async def get(self, turn_id: int) -> TurnState | None:
        async with self.engines.reads.connect() as connection:
            row = (await connection.execute(select(TURNS).where(TURNS.c.id == turn_id))).first()
            return turn_from(row) if row else None

    @store_errors
    async def find(self, channel_id: str, slack_ts: str, budget: int) -> TurnState | None:
        """The newest turn that answers the person's message ``slack_ts``, if any, loaded
        as ``load`` loads it."""
        found = (
            select(TURNS.c.id)
            .where(TURNS.c.channel_id == channel_id, TURNS.c.slack_ts == slack_ts)
            .order_by(TURNS.c.id.desc())
            .limit(1)
        )

        def work(connection: Connection) -> TurnState | None:
            turn_id = connection.scalar(found)
            return None if turn_id is None else _load(connection, turn_id, budget)

        return await self.engines.transaction(work)

    @store_errors
    async def load(self, turn_id: int, budget: int) -> TurnState | None:
        """A turn to go on with (stopped, or cut short by a crash): its row, its stored
        messages (its journal), the channel's history before it within ``budget``, and the
        channel's settings and newest summary as they are now."""
        return await self.engines.transaction(lambda c: _load(c, turn_id, budget))

    @store_errors
    async def claim(
        self, turn_id: int, stopped: Outcome, decisions: dict[str, Decision] | None = None
    ) -> TurnState | None:
        """Move a stopped turn from ``stopped`` back to running, keeping ``decisions`` in its
        state; None when it is not in that state any more (gone on already, expired)."""

        def claimed(record: TurnState) -> TurnState | None:
            if record.outcome != stopped:
                return None
            record.decisions = dict(decisions or {})
            record.outcome = Outcome.RUNNING
            return record

        return await self.engines.transaction(lambda c: _changed(c, turn_id, claimed))

    @store_errors
    async def expire(self, paused_before: datetime) -> list[TurnState]:
        """Turns waiting for approval since before ``paused_before`` become expired; returns
        them (with their state) so the shell can say so where it asked."""
        return await self.engines.transaction(lambda c: _expire(c, paused_before))

    @store_errors
    async def withdraw(self, channel_id: str, slack_ts: str) -> list[TurnState]:
        """The person deleted the question of a stopped turn (awaiting approval, or offered
        Continue): it expires, and its state keeps only where its card is, none of what the
        model made of the question (the calls it proposed). Returns those turns."""
        return await self.engines.transaction(lambda c: _withdraw(c, channel_id, slack_ts))

    @store_errors
    async def set_card(self, turn_id: int, card: dict[str, str]) -> TurnState | None:
        """Record where the turn's buttons are shown (see TurnState.card); the turn as it
        is now."""

        def shown(record: TurnState) -> TurnState:
            record.card = dict(card)
            return record

        return await self.engines.transaction(lambda c: _changed(c, turn_id, shown))


def _interrupted(
    connection: Connection, channel_id: str, window: Window, unanswered: str | None
) -> None:
    """A channel whose newest message is an answer has no turn left running: the usual
    case costs nothing. Else its running turns were cut short: interrupted."""
    if not _cut_short(window):
        return
    interrupted = connection.execute(MARK_INTERRUPTED, {"channel": channel_id, "now": utcnow()})
    if interrupted.rowcount:
        log.warning("%d interrupted turn(s) in %s", interrupted.rowcount, channel_id)
        if unanswered is not None:
            close_journal(connection, channel_id, window, unanswered)


def _cut_short(window: Window) -> bool:
    """Whether the channel may have a turn left running: its newest message is not an
    answer (a turn's answer and its outcome are stored together)."""
    newest = window.messages[-1] if window.messages else None
    return newest is not None and not (newest.role == "assistant" and not newest.tool_calls)


def _load(connection: Connection, turn_id: int, budget: int) -> TurnState | None:
    row = connection.execute(select(TURNS).where(TURNS.c.id == turn_id)).first()
    if row is None:
        return None
    rows = connection.execute(
        select(MESSAGES).where(MESSAGES.c.turn_id == turn_id).order_by(MESSAGES.c.position)
    ).all()
    state = turn_from(row)
    state.messages = [message_from(r) for r in rows]
    state.saved = len(state.messages)
    before = rows[0].position if rows else BEYOND
    state.history = read_window(connection, row.channel_id, budget, before=before).messages
    state.position = connection.scalar(NEWEST_POSITION, {"channel": row.channel_id})
    state.channel, state.summary = _read_beside(connection, row.channel_id)
    return state


#: what a turn reads of its channel besides the history: its settings, its newest summary
Beside = tuple[ChannelSettings, Summary | None]


_NEWEST_SUMMARY = (
    select(SUMMARIES.c.id)
    .where(SUMMARIES.c.channel_id == bindparam("channel"))
    .order_by(SUMMARIES.c.last_message_id.desc(), SUMMARIES.c.id.desc())
    .limit(1)
    .scalar_subquery()
)
_ONE_ROW = select(literal_column("1").label("one")).subquery("one")
#: a channel's settings and its newest summary in one row (either may be NULL)
BESIDE = select(SETTINGS.c.settings, *SUMMARIES.c).select_from(
    _ONE_ROW.outerjoin(SETTINGS, SETTINGS.c.channel_id == bindparam("channel")).outerjoin(
        SUMMARIES, SUMMARIES.c.id == _NEWEST_SUMMARY
    )
)


def _read_beside(connection: Connection, channel_id: str) -> Beside:
    """The channel's own settings and newest summary, read in the turn's first transaction
    by one statement (every turn reads them)."""
    return _beside_of(connection.execute(BESIDE, {"channel": channel_id}).one())


def _beside_of(row: Row[Any]) -> Beside:
    summary = summary_from(row) if row.id is not None else None
    return ChannelSettings.of(dict(row.settings or {})), summary


def _open(state: TurnState) -> OpenTurn:
    assert state.id is not None, "the turn is not stored"
    return OpenTurn(state.id, state.channel_id, state.position)


def _saved(state: TurnState, turn: OpenTurn, stored: list[Message]) -> None:
    """The turn's unsaved messages are ``stored`` now (with their ids)."""
    state.messages[state.saved :] = stored
    state.saved, state.position = len(state.messages), turn.position


def _changed(
    connection: Connection, turn_id: int, change: Callable[[TurnState], TurnState | None]
) -> TurnState | None:
    """The turn as ``change`` makes it (its outcome and state), stored; None when there is
    no such turn or ``change`` says no. The row is locked while it changes."""
    row = connection.execute(select(TURNS).where(TURNS.c.id == turn_id).with_for_update()).first()
    if row is None:
        return None
    record = change(turn_from(row))
    if record is not None:
        values = {"outcome": record.outcome, "state": record.waiting()}
        connection.execute(UPDATE_TURN, {"turn": turn_id, **values})
    return record


def _withdraw(connection: Connection, channel_id: str, slack_ts: str) -> list[TurnState]:
    stopped = TURNS.c.outcome.in_([o for o in Outcome if o.stopped])
    asked = (TURNS.c.channel_id == channel_id) & (TURNS.c.slack_ts == slack_ts)
    rows = connection.execute(select(TURNS).where(asked, stopped).with_for_update()).all()
    withdrawn = []
    for row in rows:
        record = turn_from(row)
        record.outcome = Outcome.EXPIRED
        record.withdraw()
        values = {"outcome": record.outcome, "state": record.waiting()}
        connection.execute(UPDATE_TURN, {"turn": row.id, **values})
        withdrawn.append(record)
    return withdrawn


def _expire(connection: Connection, paused_before: datetime) -> list[TurnState]:
    waiting = (TURNS.c.outcome == Outcome.AWAITING_APPROVAL) & (TURNS.c.finished_at < paused_before)
    rows = connection.execute(select(TURNS).where(waiting)).all()
    if not rows:
        return []
    ids = [row.id for row in rows]
    connection.execute(
        update(TURNS).where(TURNS.c.id.in_(ids), waiting).values(outcome=Outcome.EXPIRED)
    )
    expired = [turn_from(row) for row in rows]
    for record in expired:
        record.outcome = Outcome.EXPIRED
    return expired
