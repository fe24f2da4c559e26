"""SummaryStore: each channel's summaries of the messages that left its window, and the
stored messages a new summary is made of. Dropping the summaries a change in Slack or
retention makes stale is done where that change is made (bot.store.history,
``drop_stale``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.messages import Message, Summary, utcnow
from bot.store.db import Engines, store_errors
from bot.store.history import message_from
from bot.store.models import MessageRow, SummaryRow

SUMMARIES = SummaryRow.__table__


class SummaryStore:
    """Summaries, by channel. Every method is one short transaction and raises StoreError
    when the database fails."""

    def __init__(self, engines: Engines | AsyncEngine) -> None:
        self.engines = Engines.of(engines)

    @store_errors
    async def summaries(self, channel_id: str) -> list[Summary]:
        """Every stored summary of the channel, oldest first."""
        async with self.engines.reads.connect() as connection:
            rows = await connection.execute(
                select(SummaryRow.__table__)
                .where(SummaryRow.channel_id == channel_id)
                .order_by(SummaryRow.last_message_id, SummaryRow.id)
            )
            return [summary_from(row) for row in rows]

    @store_errors
    async def between(
        self, channel_id: str, after_id: int, before_id: int, most: int
    ) -> list[Message]:
        """The channel's stored messages with ids after ``after_id`` and before
        ``before_id``, oldest first: the first ``most`` of them."""
        async with self.engines.reads.connect() as connection:
            rows = await connection.execute(
                select(MessageRow.__table__)
                .where(
                    MessageRow.channel_id == channel_id,
                    MessageRow.id > after_id,
                    MessageRow.id < before_id,
                )
                .order_by(MessageRow.position)
                .limit(most)
            )
            return [message_from(row) for row in rows]

    @store_errors
    async def add(self, summary: Summary) -> None:
        """Store a new summary; the older ones of its channel stay, for review."""
        values = {
            "channel_id": summary.channel_id,
            "text": summary.text,
            "first_message_id": summary.first_message_id,
            "last_message_id": summary.last_message_id,
            "tokens": summary.tokens,
            "created_at": summary.created_at or utcnow(),
        }
        statement = SummaryRow.__table__.insert().values(values)
        await self.engines.statement(lambda connection: connection.execute(statement))


def summary_from(row: Any) -> Summary:
    return Summary(
        row.channel_id,
        row.text,
        row.first_message_id,
        row.last_message_id,
        row.tokens,
        row.created_at,
    )
