"""HistoryStore: each channel's messages and turns, and the channel's queue lock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, text, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from bot.messages import Message, ToolCall, TurnRecord, utcnow
from bot.store.db import autocommit, insert_for, on_loop, read_only, sessionmaker
from bot.store.models import ChannelRow, ChannelTicket, MessageRow, TurnRow

log = logging.getLogger(__name__)

#: a lock holder renews its ticket this often; a ticket not renewed for TICKET_TTL is dead
TICKET_RENEW = timedelta(seconds=10)
TICKET_TTL = timedelta(seconds=45)
#: rows read per page when filling the window, newest first
WINDOW_PAGE = 500
#: channels whose window a process keeps in memory between turns (least recent dropped)
KEPT_WINDOWS = 256
#: what a model request needs of a stored message
WINDOW_COLUMNS = (
    "id",
    "position",
    "turn_id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "tokens",
)


# The statements every turn runs, built once (building one costs more than running it on
# SQLite), on the tables: the ORM's bulk-statement handling is of no use to them
_TURNS = TurnRow.__table__
_MESSAGES = MessageRow.__table__
_MARK_INTERRUPTED = (
    update(_TURNS)
    .where(_TURNS.c.channel_id == bindparam("channel"), _TURNS.c.outcome == "running")
    .values(outcome="interrupted", finished_at=bindparam("now"))
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
# one multi-row INSERT, as this runs twice a turn: the ORM's bulk insert would split the
# rows by which columns are None, and asking for the ids in row order would make SQLite
# insert them one by one; the positions tell the ids apart instead
_INSERT_MESSAGES = insert(_MESSAGES).returning(_MESSAGES.c.position, _MESSAGES.c.id)
#: a page of the window, newest first: what a model request needs of a stored message
#: (plain rows; the one date, edited_at, is nearly always NULL: nothing to parse), from
#: before position "before"
_WINDOW_PAGE = (
    select(*(_MESSAGES.c[name] for name in WINDOW_COLUMNS), _MESSAGES.c.edited_at)
    .where(
        _MESSAGES.c.channel_id == bindparam("channel"),
        _MESSAGES.c.position < bindparam("before"),
    )
    .order_by(_MESSAGES.c.position.desc())
    .limit(WINDOW_PAGE)
)
#: greater than any position (a BIGINT)
_BEYOND_POSITIONS = 2**63 - 1
_WINDOW_SPAN = select(
    func.count(), func.max(_MESSAGES.c.id), func.max(_MESSAGES.c.edited_at)
).where(
    _MESSAGES.c.channel_id == bindparam("channel"),
    _MESSAGES.c.position >= bindparam("oldest"),
)


# The channel lock on PostgreSQL (see channel_lock): a per-channel advisory lock serialises
# taking a channel, held until the transaction ends
_LOCK_CHANNEL = text("SELECT pg_advisory_xact_lock(hashtext(:key))")
#: takes the lock, then a new ticket in place of the one a Slack claim kept for the message
_NEW_TICKET = text(
    """
    WITH locked AS (SELECT pg_advisory_xact_lock(hashtext(:key))),
    kept AS (
        DELETE FROM channel_tickets
        WHERE channel_id = :channel AND order_key = :order_key AND NOT holding
          AND EXISTS (SELECT FROM locked)
    )
    INSERT INTO channel_tickets (channel_id, order_key, holding, expires_at)
    SELECT CAST(:channel AS VARCHAR), CAST(:order_key AS VARCHAR), false,
           CAST(:expires AS TIMESTAMPTZ)
    FROM locked
    RETURNING id
    """
)
#: the ticket holds the channel if no live ticket holds it or comes before it in line
_HOLD_IF_FIRST = text(
    """
    UPDATE channel_tickets SET holding = true
    WHERE id = :ticket AND NOT EXISTS (
        SELECT FROM channel_tickets AS other
        WHERE other.channel_id = :channel AND other.expires_at > :now
          AND (other.holding OR (other.order_key, other.id)
                                 < (CAST(:order_key AS VARCHAR), CAST(:ticket AS BIGINT)))
    )
    RETURNING id
    """
)


def _lock_key(channel_id: str) -> str:
    return f"bot-channel:{channel_id}"


@dataclass(frozen=True)
class BegunTurn:
    """A turn just begun: its id, the stored user message, and the channel's recent
    history before it (oldest first)."""

    turn_id: int
    user: Message
    recent: list[Message]


class _Window:
    """A channel's newest messages, oldest first, in the form the window read gives them:
    the fewest whose tokens exceed ``budget`` (or all the channel has), with their
    positions. Kept between turns, it spares reading and decoding them every turn."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.positions: list[int] = []
        self.messages: list[Message] = []
        self.tokens = 0
        #: the latest edit of one of its messages, when read
        self.edited: datetime | None = None

    @property
    def newest(self) -> int | None:
        return self.positions[-1] if self.positions else None

    def add(self, position: int, message: Message) -> None:
        """Add the channel's next message, dropping old ones no longer needed."""
        self.positions.append(position)
        self.messages.append(message)
        self.tokens += message.tokens
        while self.messages and self.tokens - self.messages[0].tokens > self.budget:
            self.tokens -= self.messages[0].tokens
            del self.positions[0], self.messages[0]

    def extend(self, after: int | None, stored: Sequence[Message]) -> bool:
        """Add messages stored after position ``after``; False (nothing added) when that
        is not where this window ends, e.g. another process wrote in between."""
        if after != self.newest:
            return False
        for offset, message in enumerate(stored, start=1):
            self.add((after or 0) + offset, _windowed(message))
        return True


@dataclass(frozen=True)
class SessionSummary:
    channel_id: str
    name: str | None
    messages: int
    turns: int
    last_activity: datetime | None


class HistoryStore:
    """Stored conversations. Every method is one short transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sessions: async_sessionmaker[AsyncSession] = sessionmaker(engine)
        #: for the methods that only read (see read_only)
        self._reads = sessionmaker(read_only(engine))
        self._arrivals: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        #: recent windows by channel, least recently used first; each is taken out while
        #: a transaction uses it and put back after the commit
        self._windows: dict[str, _Window] = {}
        #: counts deletions, so a window taken out before one is not put back after it
        self._deletions = 0
        #: for single statements that need no transaction of their own
        self._autocommit = autocommit(engine)
        #: for a turn's own statements (see on_loop)
        self._turns = on_loop(engine)

    # -- the channel lock -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def channel_lock(
        self, channel_id: str, order_key: str | None = None, poll: float = 0.02
    ) -> AsyncIterator[None]:
        """Hold ``channel_id`` exclusively, in arrival order.

        On PostgreSQL the lock holds across processes, and racing deliveries are ordered by
        ``order_key``, the message's Slack ts (default: now, in the same format). Waiting
        costs a short query now and then, not a held connection. SQLite serves one process
        (several processes need PostgreSQL), so there an in-process lock is enough.
        """
        # within one process, arrival order: asyncio.Lock wakes its waiters first come,
        # first served (and the database may serve racing ticket inserts in any order)
        arrivals = self._arrivals.setdefault(channel_id, asyncio.Lock())
        if self.engine.dialect.name == "sqlite":
            async with arrivals:
                yield
            return
        order_key = order_key or f"{time.time():.6f}"
        async with arrivals:
            ticket, holding = await self._take_ticket(channel_id, order_key)
        renewer = asyncio.create_task(self._renew(ticket))
        try:
            delay = poll
            while not holding:
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, 0.25)
                async with self.engine.begin() as connection:
                    await connection.execute(_LOCK_CHANNEL, {"key": _lock_key(channel_id)})
                    holding = await self._hold_if_first(connection, channel_id, order_key, ticket)
            yield
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await asyncio.shield(self._drop_ticket(ticket))

    async def _take_ticket(self, channel_id: str, order_key: str) -> tuple[int, bool]:
        """A new ticket, and whether it already holds the channel (the usual, idle case). It
        replaces the place a Slack claim kept in line for the same message, if any."""
        async with self.engine.begin() as connection:
            ticket = await connection.scalar(
                _NEW_TICKET,
                {
                    "key": _lock_key(channel_id),
                    "channel": channel_id,
                    "order_key": order_key,
                    "expires": utcnow() + TICKET_TTL,
                },
            )
            assert ticket is not None
            return ticket, await self._hold_if_first(connection, channel_id, order_key, ticket)

    async def _hold_if_first(
        self, connection: AsyncConnection, channel_id: str, order_key: str, ticket: int
    ) -> bool:
        """Take the channel if this ticket is first in line and nobody holds it. Call with
        the channel's advisory lock taken, in an earlier statement of the transaction: it
        serialises this check-and-set, and a statement sees what was committed before it."""
        now = utcnow()
        held = await connection.scalar(
            _HOLD_IF_FIRST,
            {"ticket": ticket, "channel": channel_id, "order_key": order_key, "now": now},
        )
        if held is None:
            # while waiting, clear tickets that crashed processes left behind
            await connection.execute(
                delete(ChannelTicket).where(
                    ChannelTicket.channel_id == channel_id, ChannelTicket.expires_at <= now
                )
            )
        return held is not None

    async def _renew(self, ticket: int) -> None:
        while True:
            await asyncio.sleep(TICKET_RENEW.total_seconds())
            try:
                async with self.sessions.begin() as session:
                    await session.execute(
                        update(ChannelTicket)
                        .where(ChannelTicket.id == ticket)
                        .values(expires_at=utcnow() + TICKET_TTL)
                    )
            except (OperationalError, DBAPIError):
                log.warning("could not renew channel ticket %s; retrying", ticket)

    async def _drop_ticket(self, ticket: int) -> None:
        # a connection lost mid-statement (a PostgreSQL restart) must not leave the channel
        # blocked until the ticket expires: the pool pre-pings, so a retry gets a live one
        for pause in (0.0, 0.2, 1.0):
            await asyncio.sleep(pause)
            try:
                async with self._autocommit.connect() as connection:
                    await connection.execute(
                        delete(ChannelTicket).where(ChannelTicket.id == ticket)
                    )
                return
            except (OperationalError, DBAPIError):
                log.warning("could not drop channel ticket %s; trying again", ticket)
        log.warning("could not drop channel ticket %s; it expires by itself", ticket)

    # -- turns ------------------------------------------------------------------------

    async def begin_turn(
        self, record: TurnRecord, user_message: Message, history_budget: int = 0
    ) -> BegunTurn:
        """Store the user's message and a running turn, after reading the channel's recent
        history within ``history_budget`` (see ``_recent``; one transaction: this runs
        every turn). Call under the channel lock: any turn of the channel still marked
        running was cut short by a crash, and is marked interrupted here."""
        channel_id = record.channel_id
        deletions = self._deletions
        async with self._turns.begin() as connection:
            interrupted = await connection.execute(
                _MARK_INTERRUPTED, {"channel": channel_id, "now": utcnow()}
            )
            if interrupted.rowcount:
                log.warning("%d interrupted turn(s) in %s", interrupted.rowcount, channel_id)
            window = await self._recent(connection, channel_id, history_budget)
            recent, newest = list(window.messages), window.newest
            turn_id = await connection.scalar(
                _INSERT_TURN,
                {
                    "channel_id": channel_id,
                    "user_id": record.user_id,
                    "slack_ts": record.slack_ts,
                    "outcome": "running",
                    "tools_called": [],
                    "model": record.model,
                    "api_mode": record.api_mode,
                    "started_at": record.started_at or utcnow(),
                },
            )
            assert turn_id is not None
            (stored,), _ = await self._append(
                connection, channel_id, turn_id, [user_message], newest
            )
        window.extend(newest, [stored])
        self._keep_window(channel_id, window, deletions)
        return BegunTurn(turn_id, stored, recent)

    async def finish_turn(
        self,
        turn_id: int,
        record: TurnRecord,
        messages: Sequence[Message],
        state: dict[str, Any] | None = None,
    ) -> list[Message]:
        """Store the turn's other messages and its outcome, in one transaction."""
        deletions = self._deletions
        async with self._turns.begin() as connection:
            stored, after = await self._append(connection, record.channel_id, turn_id, messages)
            await connection.execute(
                _UPDATE_TURN,
                {
                    "turn": turn_id,
                    "rounds": record.rounds,
                    "tools_called": list(record.tools_called),
                    "outcome": record.outcome,
                    "input_tokens": record.input_tokens,
                    "output_tokens": record.output_tokens,
                    "latency_ms": record.latency_ms,
                    "model": record.model,
                    "api_mode": record.api_mode,
                    "error": record.error,
                    "state": state,
                    "finished_at": utcnow(),
                },
            )
        self._extend_window(record.channel_id, after, stored, deletions)
        return stored

    async def append(
        self, channel_id: str, turn_id: int, messages: Sequence[Message]
    ) -> list[Message]:
        """Store messages of a turn still running (a round that must outlive a crash), in
        one transaction. Call under the channel lock."""
        deletions = self._deletions
        async with self._turns.begin() as connection:
            stored, after = await self._append(connection, channel_id, turn_id, messages)
        self._extend_window(channel_id, after, stored, deletions)
        return stored

    async def claim_turn(self, turn_id: int, outcome: str) -> bool:
        """Move a stopped turn from ``outcome`` back to ``running``; False when it is not
        in that state any more (resumed by another press or process, expired, unknown)."""
        async with self.sessions.begin() as session:
            claimed = await session.execute(
                update(TurnRow)
                .where(TurnRow.id == turn_id, TurnRow.outcome == outcome)
                .values(outcome="running")
            )
            return claimed.rowcount == 1

    async def expire_paused_turns(self, paused_before: datetime) -> list[TurnRecord]:
        """Turns waiting for approval since before ``paused_before`` become ``expired``;
        returns them (with their state) so the shell can say so where it asked."""
        async with self.sessions.begin() as session:
            rows = (
                await session.scalars(
                    select(TurnRow).where(
                        TurnRow.outcome == "awaiting_approval",
                        TurnRow.finished_at < paused_before,
                    )
                )
            ).all()
            for row in rows:
                row.outcome = "expired"
            return [_turn(row) for row in rows]

    async def update_turn_state(self, turn_id: int, changes: dict[str, Any]) -> None:
        """Merge ``changes`` into a paused turn's state (e.g. where its approval card is)."""
        async with self.sessions.begin() as session:
            row = await session.get(TurnRow, turn_id, with_for_update=True)
            if row is not None:
                row.state = {**(row.state or {}), **changes}

    async def _append(
        self,
        connection: AsyncConnection,
        channel_id: str,
        turn_id: int | None,
        messages: Sequence[Message],
        last: int | None = None,
    ) -> tuple[list[Message], int | None]:
        """Insert ``messages`` after the channel's newest (``last``, when the caller has
        just read it in this transaction); returns them stored, and that position."""
        if last is None:
            last = await connection.scalar(_NEWEST_POSITION, {"channel": channel_id})
        if not messages:
            return [], last
        position = last or 0
        now = utcnow()
        stored = [
            message.with_(turn_id=turn_id, created_at=message.created_at or now)
            for message in messages
        ]
        rows = [
            {
                "channel_id": channel_id,
                "position": position + offset,
                "turn_id": turn_id,
                "role": message.role,
                "content": _storable(message.content),
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
        return [
            message.with_(id=ids[position + offset])
            for offset, message in enumerate(stored, start=1)
        ], last

    # -- reading ----------------------------------------------------------------------

    async def _recent(
        self, connection: AsyncConnection, channel_id: str, token_budget: int
    ) -> _Window:
        """The channel's window for ``token_budget`` (see ``_Window``): the one kept from
        this process's last turn there if the channel is unchanged since, else read. The
        read takes pages from the newest end: its cost follows the budget, not the
        channel's length."""
        kept = self._windows.pop(channel_id, None)
        if kept is not None and kept.budget == token_budget:
            if await self._unchanged(connection, channel_id, kept):
                return kept
        picked: list[Any] = []
        total = 0
        before = _BEYOND_POSITIONS
        while total <= token_budget:
            page = (
                await connection.execute(_WINDOW_PAGE, {"channel": channel_id, "before": before})
            ).all()
            for row in page:
                picked.append(row)
                total += row[8]  # tokens
                if total > token_budget:
                    break
            if len(page) < WINDOW_PAGE:
                break
            before = page[-1][1]  # position
        window = _Window(token_budget)
        # unpacked by position: attribute access by name costs more per row
        for row in reversed(picked):
            id_, position, turn_id, role, content, tool_calls, call_id, name, tokens, _ = row
            calls = tuple(ToolCall.from_dict(c) for c in tool_calls) if tool_calls else ()
            window.add(
                position,
                Message(
                    role=role,
                    content=content,
                    tool_calls=calls,
                    tool_call_id=call_id,
                    name=name,
                    id=id_,
                    turn_id=turn_id,
                    tokens=tokens,
                ),
            )
        oldest = window.positions[0] if window.positions else 0
        window.edited = max((row[9] for row in picked if row[9] and row[1] >= oldest), default=None)
        return window

    async def _unchanged(
        self, connection: AsyncConnection, channel_id: str, window: _Window
    ) -> bool:
        """Whether the channel's rows from the window's oldest on are exactly the window's.
        A row added since has a higher id; a row deleted lowers the count (deletions made
        through this store also drop its kept windows: SQLite may reuse the highest id); a
        row edited since has the latest ``edited_at``."""
        oldest = window.positions[0] if window.positions else 0
        count, highest, edited = (
            await connection.execute(_WINDOW_SPAN, {"channel": channel_id, "oldest": oldest})
        ).one()
        ids = [message.id for message in window.messages]
        return (
            count == len(ids)
            and highest == max(ids, default=None)  # type: ignore[type-var]
            and edited == window.edited
        )

    def _keep_window(self, channel_id: str, window: _Window, deletions: int) -> None:
        """Keep ``window`` for the channel's next turn, unless a deletion ran since it was
        taken out (``deletions``: the count then)."""
        if deletions != self._deletions:
            return
        self._windows[channel_id] = window
        if len(self._windows) > KEPT_WINDOWS:
            del self._windows[next(iter(self._windows))]

    def _extend_window(
        self, channel_id: str, after: int | None, stored: Sequence[Message], deletions: int
    ) -> None:
        """After messages were stored after position ``after``: the channel's kept window
        takes them, or is dropped when it does not end there."""
        window = self._windows.pop(channel_id, None)
        if window is not None and window.extend(after, stored):
            self._keep_window(channel_id, window, deletions)

    def _forget_windows(self, channel_id: str | None = None) -> None:
        """Before a deletion: drop the kept window of ``channel_id`` (None: of all)."""
        self._deletions += 1
        if channel_id is None:
            self._windows.clear()
        else:
            self._windows.pop(channel_id, None)

    async def messages(self, channel_id: str) -> list[Message]:
        """All of one channel's messages, in order."""
        async with self._reads() as session:
            rows = await session.scalars(
                select(MessageRow)
                .where(MessageRow.channel_id == channel_id)
                .order_by(MessageRow.position)
            )
            return [_message(row) for row in rows]

    async def iter_messages(
        self, channel_id: str | None = None, batch: int = 1000
    ) -> AsyncIterator[tuple[str, Message]]:
        """Every stored message (of one channel or all), ordered, read in batches."""
        last_id = 0
        while True:
            async with self._reads() as session:
                query = select(MessageRow).where(MessageRow.id > last_id)
                if channel_id is not None:
                    query = query.where(MessageRow.channel_id == channel_id)
                rows = (await session.scalars(query.order_by(MessageRow.id).limit(batch))).all()
            if not rows:
                return
            for row in rows:
                yield row.channel_id, _message(row)
            last_id = rows[-1].id

    async def turns(self, channel_id: str) -> list[TurnRecord]:
        async with self._reads() as session:
            rows = await session.scalars(
                select(TurnRow).where(TurnRow.channel_id == channel_id).order_by(TurnRow.id)
            )
            return [_turn(row) for row in rows]

    async def turn(self, turn_id: int) -> TurnRecord | None:
        async with self._reads() as session:
            row = await session.get(TurnRow, turn_id)
            return _turn(row) if row else None

    async def list_sessions(self) -> list[SessionSummary]:
        """Every channel with stored messages, most recently active first."""
        async with self._reads() as session:
            counts = (
                await session.execute(
                    select(
                        MessageRow.channel_id, func.count(), func.max(MessageRow.created_at)
                    ).group_by(MessageRow.channel_id)
                )
            ).all()
            turns = dict(
                (
                    await session.execute(
                        select(TurnRow.channel_id, func.count()).group_by(TurnRow.channel_id)
                    )
                ).all()
            )
            names = dict(
                (await session.execute(select(ChannelRow.channel_id, ChannelRow.name))).all()
            )
        summaries = [
            SessionSummary(channel, names.get(channel), count, turns.get(channel, 0), last)
            for channel, count, last in counts
        ]
        summaries.sort(key=lambda s: s.last_activity or datetime.min, reverse=True)
        return summaries

    async def channels_with_text(self, text: str) -> set[str]:
        """The channels with a message whose content contains ``text`` (case-insensitive
        for ASCII on every backend)."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        async with self._reads() as session:
            found = await session.scalars(
                select(MessageRow.channel_id)
                .where(MessageRow.content.ilike(pattern, escape="\\"))
                .distinct()
            )
            return set(found)

    async def has_channel(self, channel_id: str) -> bool:
        async with self._reads() as session:
            found = await session.scalar(
                select(MessageRow.id).where(MessageRow.channel_id == channel_id).limit(1)
            )
            if found is None:
                found = await session.scalar(
                    select(TurnRow.id).where(TurnRow.channel_id == channel_id).limit(1)
                )
            return found is not None

    # -- names, deletion and retention ------------------------------------------------

    async def set_channel_name(self, channel_id: str, name: str) -> None:
        upsert = insert_for(self.engine)
        statement = upsert(ChannelRow).values(channel_id=channel_id, name=name, updated_at=utcnow())
        renamed = {"name": statement.excluded.name, "updated_at": statement.excluded.updated_at}
        async with self.sessions.begin() as session:
            await session.execute(
                statement.on_conflict_do_update(index_elements=["channel_id"], set_=renamed)
            )

    async def delete_channel(self, channel_id: str) -> int:
        """Forget one session; returns how many messages were deleted."""
        self._forget_windows(channel_id)
        async with self.sessions.begin() as session:
            deleted = await session.execute(
                delete(MessageRow).where(MessageRow.channel_id == channel_id)
            )
            await session.execute(delete(TurnRow).where(TurnRow.channel_id == channel_id))
            await session.execute(delete(ChannelRow).where(ChannelRow.channel_id == channel_id))
            return deleted.rowcount or 0

    async def delete_slack_message(self, channel_id: str, slack_ts: str) -> int:
        """A message deleted in Slack is deleted here too."""
        self._forget_windows(channel_id)
        async with self.sessions.begin() as session:
            deleted = await session.execute(
                delete(MessageRow).where(
                    MessageRow.channel_id == channel_id, MessageRow.slack_ts == slack_ts
                )
            )
            return deleted.rowcount or 0

    async def edit_slack_message(
        self, channel_id: str, slack_ts: str, content: str, tokens: int
    ) -> int:
        """A person's message edited in Slack reads as edited here too."""
        self._forget_windows(channel_id)
        async with self.sessions.begin() as session:
            edited = await session.execute(
                update(MessageRow)
                .where(
                    MessageRow.channel_id == channel_id,
                    MessageRow.slack_ts == slack_ts,
                    MessageRow.role == "user",
                )
                .values(content=_storable(content), tokens=tokens, edited_at=utcnow())
            )
            return edited.rowcount or 0

    async def purge(self, older_than: datetime) -> int:
        """Retention: delete messages created before ``older_than``, and turns left empty."""
        self._forget_windows()
        async with self.sessions.begin() as session:
            deleted = await session.execute(
                delete(MessageRow).where(MessageRow.created_at < older_than)
            )
            await session.execute(
                delete(TurnRow).where(
                    TurnRow.started_at < older_than,
                    ~select(MessageRow.id).where(MessageRow.turn_id == TurnRow.id).exists(),
                )
            )
            return deleted.rowcount or 0

    async def ping(self) -> bool:
        try:
            async with self._reads() as session:
                await session.execute(select(1))
            return True
        except (OperationalError, DBAPIError, OSError):
            return False


def _storable(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL (a model's answer or a tool's text may have one): it
    is dropped, on every backend alike."""
    return text.replace("\x00", "") if text and "\x00" in text else text


def _windowed(message: Message) -> Message:
    """``message`` as the window read gives it back: as stored, with what a request needs."""
    return message.with_(
        content=_storable(message.content), user_id=None, slack_ts=None, created_at=None
    )


def _message(row: Any) -> Message:
    """A Message from an ORM row or a plain result row (same column names)."""
    return Message(
        role=row.role,  # type: ignore[arg-type]
        content=row.content,
        tool_calls=tuple(ToolCall.from_dict(c) for c in row.tool_calls or ()),
        tool_call_id=row.tool_call_id,
        name=row.tool_name,
        user_id=row.user_id,
        slack_ts=row.slack_ts,
        id=row.id,
        turn_id=row.turn_id,
        created_at=row.created_at,
        tokens=row.tokens,
        edited_at=row.edited_at,
    )


def _turn(row: TurnRow) -> TurnRecord:
    return TurnRecord(
        channel_id=row.channel_id,
        user_id=row.user_id,
        slack_ts=row.slack_ts,
        rounds=row.rounds,
        tools_called=list(row.tools_called or ()),
        outcome=row.outcome,  # type: ignore[arg-type]
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        latency_ms=row.latency_ms,
        model=row.model,
        api_mode=row.api_mode,
        error=row.error,
        id=row.id,
        started_at=row.started_at,
        state=row.state,
    )
