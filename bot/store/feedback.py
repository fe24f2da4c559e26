"""FeedbackStore: what people said of the bot's answers, one verdict per person per turn
(a later press replaces the earlier one); and how the history's readers find it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Connection, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.messages import NEGATIVE, POSITIVE, Feedback, utcnow
from bot.store.db import Engines, insert_for, store_errors
from bot.store.models import FeedbackRow, TurnRow
from bot.turn import TurnState

FEEDBACK = FeedbackRow.__table__
TURNS = TurnRow.__table__


class FeedbackStore:
    """Raises StoreError when the database fails."""

    def __init__(self, engines: Engines | AsyncEngine) -> None:
        self.engines = Engines.of(engines)
        self._insert = insert_for(self.engines.dialect)

    @store_errors
    async def record(self, turn_id: int, channel_id: str, user_id: str, value: str) -> bool:
        """``user_id``'s verdict on turn ``turn_id`` of ``channel_id``, replacing theirs
        before; False (nothing stored) when there is no such turn in that channel."""
        if value not in (POSITIVE, NEGATIVE):
            raise ValueError(f"not a verdict: {value!r}")
        statement = self._insert(FEEDBACK).values(
            turn_id=turn_id, user_id=user_id, value=value, given_at=utcnow()
        )
        upsert = statement.on_conflict_do_update(
            index_elements=["turn_id", "user_id"],
            set_={"value": statement.excluded.value, "given_at": statement.excluded.given_at},
        )
        turn = select(TURNS.c.id).where(TURNS.c.id == turn_id, TURNS.c.channel_id == channel_id)

        def work(connection: Connection) -> bool:
            if connection.scalar(turn) is None:
                return False
            connection.execute(upsert)
            return True

        return await self.engines.transaction(work)


async def attach(connection: AsyncConnection, turns: Sequence[TurnState]) -> None:
    """Each turn's feedback, oldest first, into ``turn.feedback``."""
    ids = [turn.id for turn in turns if turn.id is not None]
    if not ids:
        return
    rows = await connection.execute(
        select(FEEDBACK)
        .where(FEEDBACK.c.turn_id.in_(ids))
        .order_by(FEEDBACK.c.given_at, FEEDBACK.c.user_id)
    )
    by_turn: dict[int, list[Feedback]] = defaultdict(list)
    for row in rows:
        by_turn[row.turn_id].append(Feedback(row.user_id, row.value, row.given_at))
    for turn in turns:
        turn.feedback = by_turn.get(turn.id or 0, [])


async def counts(connection: AsyncConnection) -> dict[str, dict[str, int]]:
    """Verdicts by channel, then by value: {"C1": {"positive": 2, "negative": 1}}."""
    rows = await connection.execute(
        select(TURNS.c.channel_id, FEEDBACK.c.value, func.count())
        .select_from(FEEDBACK.join(TURNS, TURNS.c.id == FEEDBACK.c.turn_id))
        .group_by(TURNS.c.channel_id, FEEDBACK.c.value)
    )
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for channel, value, count in rows:
        found[channel][value] = count
    return found
