"""SlackEvents: the Slack messages the bot has taken on, so each one is answered once.

A delivery *claims* its message by (channel, ts) before it is acknowledged. The row lives in
the database, so the claim holds across retries, restarts and processes, and an
``app_mention`` and a ``message`` for the same Slack message meet on the same key.

    received --(answered, or the turn was stored)--> done
        |
        +--(ended before anything was stored)--> failed
        +--(holder died: its lease ran out)-----> (taken over by a retry)

A ``received`` claim is live while its holder renews the lease. A retry takes a claim over
only when it is ``failed`` or its lease ran out *and* no message with that ts was stored, so
a first attempt that died early is still answered, and one that got further is not repeated.

Claims and releases that arrive together are written together (one transaction for all
that came in while the previous one ran): a burst of events costs a few transactions, not
one each, which keeps acknowledgements fast even on SQLite's single writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from sqlalchemy import and_, delete, or_, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.messages import utcnow
from bot.store.models import MessageRow, SlackEventRow

RECEIVED = "received"
DONE = "done"
FAILED = "failed"

#: a claim not renewed for this long belongs to a dead process
LEASE = timedelta(seconds=30)
#: holders renew their claims this often
RENEW_EVERY = timedelta(seconds=10)

Key = tuple[str, str]
_KEY = tuple_(SlackEventRow.channel_id, SlackEventRow.message_ts)

Item = TypeVar("Item")
Result = TypeVar("Result")


class SlackEvents:
    """Claims on Slack messages, keyed by (channel ID, message ts)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
        self._insert = dialect.insert
        self._claims = _GroupCommit(self._claim_all)
        self._releases = _GroupCommit(self._release_all)

    async def claim(self, channel_id: str, message_ts: str, event_id: str | None = None) -> bool:
        """Take the message on; False when another delivery has it or had it."""
        return await self._claims.submit(((channel_id, message_ts), event_id))

    async def finish(self, channel_id: str, message_ts: str, *, done: bool) -> None:
        """``done``: answered or stored, never again; else ``failed``: a retry may answer."""
        await self._releases.submit(((channel_id, message_ts), done))

    async def renew(self, keys: Collection[Key]) -> None:
        """Extend the leases of claims this process still works on."""
        if not keys:
            return
        now = utcnow()
        async with self.engine.begin() as connection:
            await connection.execute(
                update(SlackEventRow)
                .where(_KEY.in_(list(keys)), SlackEventRow.status == RECEIVED)
                .values(lease_until=now + LEASE, updated_at=now)
            )

    async def status(self, channel_id: str, message_ts: str) -> str | None:
        async with self.engine.connect() as connection:
            return await connection.scalar(
                select(SlackEventRow.status).where(_KEY == (channel_id, message_ts))
            )

    async def forget_before(self, moment: datetime) -> int:
        """Drop claims untouched since ``moment``: finished ones, and those of dead holders
        (a live claim is renewed). Slack stops retrying minutes after an event."""
        async with self.engine.begin() as connection:
            deleted = await connection.execute(
                delete(SlackEventRow).where(SlackEventRow.updated_at < moment)
            )
            return deleted.rowcount or 0

    async def _claim_all(self, items: list[tuple[Key, str | None]]) -> list[bool]:
        now = utcnow()
        events: dict[Key, str | None] = {}
        for key, event_id in items:
            events.setdefault(key, event_id)
        async with self.engine.begin() as connection:
            claimed = await self._insert_new(connection, events, now)
            others = [key for key in events if key not in claimed]
            if others:
                claimed |= await self._take_over(connection, others, now)
        # the same message twice in one batch: only its first delivery gets it
        results = []
        for key, _ in items:
            results.append(key in claimed)
            claimed.discard(key)
        return results

    async def _insert_new(
        self, connection: AsyncConnection, events: dict[Key, str | None], now: datetime
    ) -> set[Key]:
        rows = [
            {
                "channel_id": channel,
                "message_ts": ts,
                "event_id": event_id,
                "status": RECEIVED,
                "lease_until": now + LEASE,
                "created_at": now,
                "updated_at": now,
            }
            for (channel, ts), event_id in events.items()
        ]
        inserted = await connection.execute(
            self._insert(SlackEventRow)
            .on_conflict_do_nothing(index_elements=["channel_id", "message_ts"])
            .returning(SlackEventRow.channel_id, SlackEventRow.message_ts),
            rows,
        )
        return {(channel, ts) for channel, ts in inserted}

    async def _take_over(
        self, connection: AsyncConnection, keys: list[Key], now: datetime
    ) -> set[Key]:
        stored = (
            select(MessageRow.id)
            .where(
                MessageRow.channel_id == SlackEventRow.channel_id,
                MessageRow.slack_ts == SlackEventRow.message_ts,
            )
            .exists()
        )
        # one UPDATE decides, so two retries racing for the same claim cannot both win
        taken = await connection.execute(
            update(SlackEventRow)
            .where(
                _KEY.in_(keys),
                or_(
                    SlackEventRow.status == FAILED,
                    and_(SlackEventRow.status == RECEIVED, SlackEventRow.lease_until < now),
                ),
                ~stored,
            )
            .values(status=RECEIVED, lease_until=now + LEASE, updated_at=now)
            .returning(SlackEventRow.channel_id, SlackEventRow.message_ts)
        )
        return {(channel, ts) for channel, ts in taken}

    async def _release_all(self, items: list[tuple[Key, bool]]) -> list[None]:
        now = utcnow()
        async with self.engine.begin() as connection:
            for done in (True, False):
                keys = [key for key, outcome in items if outcome is done]
                if keys:
                    await connection.execute(
                        update(SlackEventRow)
                        .where(_KEY.in_(keys))
                        .values(status=DONE if done else FAILED, lease_until=None, updated_at=now)
                    )
        return [None] * len(items)


class _GroupCommit(Generic[Item, Result]):
    """Runs ``write`` on everything submitted while the previous write was running."""

    def __init__(self, write: Callable[[list[Item]], Awaitable[list[Result]]]) -> None:
        self._write = write
        self._waiting: list[tuple[Item, asyncio.Future[Result]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                results = await self._write([item for item, _ in batch])
            except Exception as exc:  # every waiter gets the failure, the writer goes on
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
