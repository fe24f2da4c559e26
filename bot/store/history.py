"""HistoryStore: each channel's stored messages as people review them (the admin pages, the
CLI), and what changes them from outside a turn: edits and deletions made in Slack, a
session forgotten, retention. Turns write through TurnStore (bot.store.turns)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.context import Context
from bot.messages import (
    NEGATIVE,
    POSITIVE,
    Message,
    Outcome,
    SessionSummary,
    ToolCall,
    Usage,
    utcnow,
)
from bot.store.db import Engines, insert_for, store_errors
from bot.store.feedback import attach
from bot.store.feedback import counts as feedback_counts
from bot.store.models import ChannelRow, MessageRow, SummaryRow, ThreadAskerRow, TurnRow
from bot.store.window import Windows, storable
from bot.turn import TurnState

T = TypeVar("T")


class HistoryStore:
    """Stored conversations, for review. Every method is one short transaction and raises
    StoreError when the database fails."""

    def __init__(self, engines: Engines | AsyncEngine, windows: Windows | None = None) -> None:
        self.engines = Engines.of(engines)
        #: the windows TurnStore keeps: a change made here drops the channel's
        self.windows = windows or Windows()
        self._insert = insert_for(self.engines.dialect)

    @store_errors
    async def messages(self, channel_id: str) -> list[Message]:
        """All of one channel's messages, in order."""
        async with self.engines.reads.connect() as connection:
            rows = await connection.execute(
                select(MessageRow.__table__)
                .where(MessageRow.channel_id == channel_id)
                .order_by(MessageRow.position)
            )
            return [message_from(row) for row in rows]

    def iter_messages(
        self, channel_id: str | None = None, batch: int = 1000
    ) -> AsyncIterator[tuple[str, Message]]:
        """Every stored message (of one channel or all), ordered, read in batches."""
        return self._in_batches(MessageRow, message_from, channel_id, batch)

    def iter_turns(
        self, channel_id: str | None = None, batch: int = 1000
    ) -> AsyncIterator[tuple[str, TurnState]]:
        """Every recorded turn (of one channel or all), oldest first, with its feedback, read
        in batches."""
        return self._in_batches(TurnRow, turn_from, channel_id, batch, complete=attach)

    @store_errors
    async def _in_batches(
        self,
        table: type[MessageRow] | type[TurnRow],
        convert: Callable[[Any], T],
        channel_id: str | None,
        batch: int,
        complete: Callable[[AsyncConnection, list[T]], Awaitable[None]] | None = None,
    ) -> AsyncIterator[tuple[str, T]]:
        """``convert``ed rows in id order; ``complete`` adds what other tables hold."""
        last_id = 0
        while True:
            query = select(table.__table__).where(table.id > last_id)
            if channel_id is not None:
                query = query.where(table.channel_id == channel_id)
            async with self.engines.reads.connect() as connection:
                rows = (await connection.execute(query.order_by(table.id).limit(batch))).all()
                items = [convert(row) for row in rows]
                if complete is not None:
                    await complete(connection, items)
            if not rows:
                return
            for row, item in zip(rows, items, strict=True):
                yield row.channel_id, item
            last_id = rows[-1].id

    @store_errors
    async def turns(self, channel_id: str) -> list[TurnState]:
        async with self.engines.reads.connect() as connection:
            rows = await connection.execute(
                select(TurnRow.__table__)
                .where(TurnRow.channel_id == channel_id)
                .order_by(TurnRow.id)
            )
            turns = [turn_from(row) for row in rows]
            await attach(connection, turns)
            return turns

    @store_errors
    async def list_sessions(self) -> list[SessionSummary]:
        """Every channel with stored messages, most recently active first."""
        async with self.engines.reads.connect() as connection:
            counts = (
                await connection.execute(
                    select(
                        MessageRow.channel_id, func.count(), func.max(MessageRow.created_at)
                    ).group_by(MessageRow.channel_id)
                )
            ).all()
            turns = dict(
                (
                    await connection.execute(
                        select(TurnRow.channel_id, func.count()).group_by(TurnRow.channel_id)
                    )
                ).all()
            )
            names = dict(
                (await connection.execute(select(ChannelRow.channel_id, ChannelRow.name))).all()
            )
            verdicts = await feedback_counts(connection)
        summaries = [
            SessionSummary(
                channel,
                names.get(channel),
                count,
                turns.get(channel, 0),
                last,
                verdicts.get(channel, {}).get(POSITIVE, 0),
                verdicts.get(channel, {}).get(NEGATIVE, 0),
            )
            for channel, count, last in counts
        ]
        summaries.sort(key=lambda s: s.last_activity or datetime.min, reverse=True)
        return summaries

    @store_errors
    async def channels_with_text(self, text: str) -> set[str]:
        """The channels with a message whose content contains ``text`` (case-insensitive
        for ASCII on every backend)."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        async with self.engines.reads.connect() as connection:
            found = await connection.scalars(
                select(MessageRow.channel_id)
                .where(MessageRow.content.ilike(pattern, escape="\\"))
                .distinct()
            )
            return set(found)

    @store_errors
    async def has_channel(self, channel_id: str) -> bool:
        async with self.engines.reads.connect() as connection:
            for table in (MessageRow, TurnRow):
                found = await connection.scalar(
                    select(table.id).where(table.channel_id == channel_id).limit(1)
                )
                if found is not None:
                    return True
            return False

    @store_errors
    async def set_channel_name(self, channel_id: str, name: str) -> None:
        statement = self._insert(ChannelRow).values(
            channel_id=channel_id, name=name, updated_at=utcnow()
        )
        renamed = {"name": statement.excluded.name, "updated_at": statement.excluded.updated_at}
        upsert = statement.on_conflict_do_update(index_elements=["channel_id"], set_=renamed)
        await self.engines.statement(lambda connection: connection.execute(upsert))

    @store_errors
    async def delete_channel(self, channel_id: str) -> int:
        """Forget one session; returns how many messages were deleted."""

        def work(connection: Connection) -> int:
            deleted = connection.execute(
                delete(MessageRow).where(MessageRow.channel_id == channel_id)
            )
            connection.execute(delete(TurnRow).where(TurnRow.channel_id == channel_id))
            connection.execute(delete(ChannelRow).where(ChannelRow.channel_id == channel_id))
            connection.execute(
                delete(ThreadAskerRow).where(ThreadAskerRow.channel_id == channel_id)
            )
            connection.execute(delete(SummaryRow).where(SummaryRow.channel_id == channel_id))
            return deleted.rowcount or 0

        return await self.windows.changing(channel_id, self.engines.transaction(work))

    @store_errors
    async def delete_slack_message(self, channel_id: str, slack_ts: str) -> int:
        """A message deleted in Slack is deleted here too, and so are the summaries that
        cover it."""
        statement = delete(MessageRow).where(
            MessageRow.channel_id == channel_id, MessageRow.slack_ts == slack_ts
        )

        def work(connection: Connection) -> int:
            drop_stale(connection, channel_id, _ids_of(connection, channel_id, slack_ts))
            return connection.execute(statement).rowcount or 0

        return await self.windows.changing(channel_id, self.engines.transaction(work))

    @store_errors
    async def edit_slack_message(
        self, channel_id: str, slack_ts: str, content: str, tokens: int
    ) -> int:
        """A person's message edited in Slack reads as edited here too (one that shows a
        thread's messages is rewritten whole: ThreadStore.rewrite), and the summaries that
        cover it are dropped."""
        statement = (
            update(MessageRow)
            .where(
                MessageRow.channel_id == channel_id,
                MessageRow.slack_ts == slack_ts,
                MessageRow.role == "user",
                MessageRow.context.is_(None),
            )
            .values(content=storable(content), tokens=tokens, edited_at=utcnow())
        )

        def work(connection: Connection) -> int:
            drop_stale(connection, channel_id, _ids_of(connection, channel_id, slack_ts))
            return connection.execute(statement).rowcount or 0

        return await self.windows.changing(channel_id, self.engines.transaction(work))

    @store_errors
    async def purge(self, older_than: datetime) -> int:
        """Retention: delete messages created before ``older_than``, and turns left empty."""

        def work(connection: Connection) -> int:
            deleted = connection.execute(
                delete(MessageRow).where(MessageRow.created_at < older_than)
            )
            connection.execute(
                delete(TurnRow).where(
                    TurnRow.started_at < older_than,
                    ~select(MessageRow.id).where(MessageRow.turn_id == TurnRow.id).exists(),
                )
            )
            # a summary covers its channel from its first message on: that one went first
            connection.execute(
                delete(SummaryRow).where(
                    ~select(MessageRow.id)
                    .where(MessageRow.id == SummaryRow.first_message_id)
                    .exists()
                )
            )
            return deleted.rowcount or 0

        return await self.windows.changing(None, self.engines.transaction(work))

    async def ping(self) -> bool:
        """Whether the database answers (the health check)."""
        try:
            async with self.engines.reads.connect() as connection:
                await connection.execute(select(1))
            return True
        except Exception:  # any failure to answer is "not healthy", never a 500
            return False


def drop_stale(connection: Connection, channel_id: str, changed_ids: list[int]) -> None:
    """The channel's summaries that cover one of ``changed_ids`` (messages deleted or
    edited) are dropped: each covers its channel from its first message to its last, so
    those ending before the first changed one stay."""
    if changed_ids:
        connection.execute(
            delete(SummaryRow).where(
                SummaryRow.channel_id == channel_id,
                SummaryRow.last_message_id >= min(changed_ids),
            )
        )


def _ids_of(connection: Connection, channel_id: str, slack_ts: str) -> list[int]:
    """The ids of the channel's stored messages of one Slack message."""
    return list(
        connection.scalars(
            select(MessageRow.id).where(
                MessageRow.channel_id == channel_id, MessageRow.slack_ts == slack_ts
            )
        )
    )


def message_from(row: Any) -> Message:
    """A Message from a row of the messages table."""
    return Message(
        role=row.role,
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
        context=Context.from_dict(row.context) if row.context else None,
        asked=row.context.get("asked") if row.context else None,
    )


def turn_from(row: Any) -> TurnState:
    """A turn as its row of the turns table has it (its messages are not read)."""
    turn = TurnState(
        channel_id=row.channel_id,
        user_id=row.user_id,
        slack_ts=row.slack_ts,
        rounds=row.rounds,
        tools_called=list(row.tools_called or ()),
        outcome=Outcome(row.outcome),
        usage=Usage(row.input_tokens, row.output_tokens),
        latency_ms=row.latency_ms,
        model=row.model,
        api_mode=row.api_mode,
        error=row.error,
        id=row.id,
        started_at=row.started_at,
    )
    turn.restore_waiting(row.state)
    return turn
