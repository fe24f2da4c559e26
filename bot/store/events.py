"""SlackEvents: the Slack messages the bot has taken on, so each one is answered once, and
answered even when the process that took it on dies.

A delivery *claims* its message by (channel, ts) before it is acknowledged, and the claim
keeps the question. The row lives in the database, so the claim holds across retries,
restarts and processes, and an ``app_mention`` and a ``message`` for the same Slack message
meet on the same key.

    received --(its turn stored, the reply kept)--> stored --(the reply posted)--> done
    received --(ended before anything was stored)--> failed
    received or stored --(handed back at shutdown: the lease ends now)--> taken over
    failed --(taken over by a Slack retry)--> received: answered again
    received, lease run out --(taken over by a sweep or a retry)--> received: answered again
    stored, lease run out --(taken over by a sweep)--> stored: the kept reply posted

A ``received`` or ``stored`` claim is live while its holder (one process, ``holder``)
renews the lease, and only its holder moves it on: a holder too slow to renew, whose claim
was taken over, posts nothing. Once the lease ran out, one UPDATE hands the claim to one
process: every process sweeps for such claims (``take_over_abandoned``), and a Slack retry
takes over ``failed`` and ``received`` ones. A ``received`` claim taken over is answered
again (a turn its holder had begun is marked interrupted when the next one begins); a
``stored`` one has its kept reply posted.

On PostgreSQL a claim also takes the message's place in its channel's queue (a ticket row,
see ``HistoryStore.channel_lock``) in the same transaction, before the ack: the queue's
order is then the order in which the messages arrived, whichever process got each one.

Claims, kept replies and releases that arrive together are written together (one
transaction for all that came in while the previous one ran): a burst of events costs a few
transactions, not one each, which keeps acknowledgements fast even on SQLite's single writer.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    delete,
    exists,
    insert,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.messages import utcnow
from bot.store.db import autocommit, insert_for, on_loop, read_only
from bot.store.history import TICKET_TTL
from bot.store.models import ChannelTicket, SlackEventRow

RECEIVED = "received"
STORED = "stored"
DONE = "done"
FAILED = "failed"
#: the claims a holder works on, and renews
LIVE = (RECEIVED, STORED)
#: a release that ends the lease at once, the claim staying live (see ``hand_back``)
HANDED_BACK = "handed back"

#: a claim not renewed for this long belongs to a dead process
LEASE = timedelta(seconds=30)
#: holders renew their claims this often
RENEW_EVERY = timedelta(seconds=10)
#: every process looks for claims of dead holders this often: a question lost with its
#: process is taken up again within LEASE + TAKE_OVER_EVERY
TAKE_OVER_EVERY = timedelta(seconds=5)
#: claims one process takes over at a time; more wait for the next sweep (any process's)
TAKE_OVER_BATCH = 50

Key = tuple[str, str]
_KEY = tuple_(SlackEventRow.channel_id, SlackEventRow.message_ts)
#: a place in a channel's queue kept for a claimed message, until its turn takes it
_PLACE = tuple_(ChannelTicket.channel_id, ChannelTicket.order_key)

#: PostgreSQL: new claims and their places in their channels' queues, in one statement
_CLAIM_AND_QUEUE = text(
    """
    WITH claimed AS (
        INSERT INTO slack_events (channel_id, message_ts, event_id, status, holder,
                                  lease_until, question, created_at, updated_at)
        SELECT channel, ts, event_id, :status, :holder, :lease_until, CAST(question AS JSON),
               :now, :now
        FROM unnest(CAST(:channels AS VARCHAR[]), CAST(:tss AS VARCHAR[]),
                    CAST(:event_ids AS VARCHAR[]), CAST(:questions AS TEXT[]))
             AS new (channel, ts, event_id, question)
        ON CONFLICT (channel_id, message_ts) DO NOTHING
        RETURNING channel_id, message_ts
    ), places AS (
        INSERT INTO channel_tickets (channel_id, order_key, holding, expires_at)
        SELECT channel_id, message_ts, false, :ticket_expires FROM claimed
    )
    SELECT channel_id, message_ts FROM claimed
    """
)

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class TakenOver:
    """A claim taken over from a holder that died: its question, and the reply its holder
    kept (None: the question still needs an answer)."""

    question: dict[str, Any]
    reply: dict[str, Any] | None


class SlackEvents:
    """Claims on Slack messages, keyed by (channel ID, message ts), held by this process."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        #: names this process on the claims it holds
        self.holder = uuid.uuid4().hex
        #: several processes share the channel queues only on PostgreSQL (see channel_lock)
        self._queues_shared = engine.dialect.name == "postgresql"
        self._insert = insert_for(engine)
        self._autocommit = autocommit(engine)
        #: for the claims of turns under way (see on_loop)
        self._turns = on_loop(engine)
        self._reads = read_only(engine)
        self._claims = _GroupCommit(self._claim_all)
        self._replies = _GroupCommit(self._keep_replies)
        self._releases = _GroupCommit(self._release_all)

    async def claim(
        self,
        channel_id: str,
        message_ts: str,
        event_id: str | None = None,
        question: dict[str, Any] | None = None,
    ) -> bool:
        """Take the message on; False when another delivery has it or had it. ``question``
        is what another process needs to answer it should this one die (without it, only
        a Slack retry can)."""
        return await self._claims.submit(((channel_id, message_ts), event_id, question))

    async def keep_reply(self, channel_id: str, message_ts: str, reply: dict[str, Any]) -> bool:
        """The message's turn is stored: keep its reply until it is posted. False when this
        process no longer holds the claim (another took it over, and answers it)."""
        return await self._replies.submit(((channel_id, message_ts), reply))

    async def finish(self, channel_id: str, message_ts: str, *, done: bool) -> None:
        """``done``: answered, never again; else ``failed``: a retry may answer (a kept
        reply is never given up: it stays ``stored`` for a sweep to post)."""
        await self._releases.submit(((channel_id, message_ts), DONE if done else FAILED))

    async def forget_question(self, channel_id: str, message_ts: str) -> None:
        """The message was deleted in Slack: a finished claim keeps no copy of it (a live
        one still needs its copy to be answered, should its holder die)."""
        async with self.engine.begin() as connection:
            await connection.execute(
                update(SlackEventRow)
                .where(_KEY == (channel_id, message_ts), SlackEventRow.status.in_((DONE, FAILED)))
                .values(question=None, reply=None)
            )

    async def hand_back(self, channel_id: str, message_ts: str) -> None:
        """This process stops (shutdown) before the message was answered or its reply
        posted: the lease ends now, so another process's sweep (or this one's successor's)
        takes it over, as it would had this process died."""
        await self._releases.submit(((channel_id, message_ts), HANDED_BACK))

    async def renew(self, keys: Collection[Key]) -> None:
        """Extend the leases of claims this process still works on."""
        if not keys:
            return
        now = utcnow()
        async with self._turns.begin() as connection:
            await connection.execute(
                update(SlackEventRow)
                .where(_KEY.in_(list(keys)), self._held_here, SlackEventRow.status.in_(LIVE))
                .values(lease_until=now + LEASE, updated_at=now)
            )
            if self._queues_shared:  # the places kept in line (a turn renews its own)
                await connection.execute(
                    update(ChannelTicket)
                    .where(_PLACE.in_(list(keys)), ChannelTicket.holding.is_(False))
                    .values(expires_at=now + TICKET_TTL)
                )

    async def take_over_abandoned(self) -> list[TakenOver]:
        """Claims whose holder died (their lease ran out), now held by this process. One
        UPDATE decides, so each goes to one process only. Never this process's own: those
        it works on it renews, and one it dropped (say, on a database error) may have been
        posted already."""
        now = utcnow()
        abandoned = and_(
            SlackEventRow.status.in_(LIVE),
            SlackEventRow.lease_until < now,
            SlackEventRow.question.is_not(None),
            SlackEventRow.holder != self.holder,
        )
        # a read first: the usual sweep finds nothing, and then takes no write lock (on
        # SQLite, the file's one lock, which another process's import or purge may hold)
        async with self._reads.connect() as connection:
            if not await connection.scalar(select(exists().where(abandoned))):
                return []
        # PostgreSQL: racing sweeps skip each other's rows rather than wait for them; the
        # UPDATE checks `abandoned` again on the row it locked, so a row renewed or taken
        # meanwhile stays with its holder
        candidates = (
            select(SlackEventRow.channel_id, SlackEventRow.message_ts)
            .where(abandoned)
            .limit(TAKE_OVER_BATCH)
            .with_for_update(skip_locked=True)
        )
        async with self.engine.begin() as connection:
            taken = await connection.execute(
                update(SlackEventRow)
                .where(_KEY.in_(candidates), abandoned)
                .values(holder=self.holder, lease_until=now + LEASE, updated_at=now)
                .returning(SlackEventRow.question, SlackEventRow.reply)
            )
            return [TakenOver(question, reply) for question, reply in taken]

    async def status(self, channel_id: str, message_ts: str) -> str | None:
        async with self._reads.connect() as connection:
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

    @property
    def _held_here(self) -> ColumnElement[bool]:
        return SlackEventRow.holder == self.holder

    async def _claim_all(self, items: list[tuple[Key, str | None, Any]]) -> list[bool]:
        now = utcnow()
        events: dict[Key, tuple[str | None, Any]] = {}
        for key, event_id, question in items:
            events.setdefault(key, (event_id, question))
        if self._queues_shared:
            claimed = await self._claim_and_queue(events, now)
        else:
            async with self._turns.begin() as connection:
                claimed = await self._insert_new(connection, events, now)
        others = [key for key in events if key not in claimed]
        if others:  # seen before: a Slack retry, or the same message delivered twice
            async with self._turns.begin() as connection:
                taken = await self._take_over(connection, others, now)
                if taken and self._queues_shared:
                    await connection.execute(
                        insert(ChannelTicket),
                        [
                            {
                                "channel_id": channel,
                                "order_key": ts,
                                "holding": False,
                                "expires_at": now + TICKET_TTL,
                            }
                            for channel, ts in taken
                        ],
                    )
            claimed |= taken
        # the same message twice in one batch: only its first delivery gets it
        results = []
        for key, _, _ in items:
            results.append(key in claimed)
            claimed.discard(key)
        return results

    async def _claim_and_queue(
        self, events: dict[Key, tuple[str | None, Any]], now: datetime
    ) -> set[Key]:
        """PostgreSQL: insert the new claims with their places in line, atomically, in one
        round trip (no BEGIN and COMMIT): in a burst, each round trip waits behind the
        requests being read in, and the acks wait for this."""
        params = {
            "channels": [channel for channel, _ in events],
            "tss": [ts for _, ts in events],
            "event_ids": [event_id for event_id, _ in events.values()],
            "questions": [
                None if question is None else json.dumps(question)
                for _, question in events.values()
            ],
            "status": RECEIVED,
            "holder": self.holder,
            "lease_until": now + LEASE,
            "now": now,
            "ticket_expires": now + TICKET_TTL,
        }
        async with self._autocommit.connect() as connection:
            inserted = await connection.execute(_CLAIM_AND_QUEUE, params)
            return {(channel, ts) for channel, ts in inserted}

    async def _insert_new(
        self, connection: AsyncConnection, events: dict[Key, tuple[str | None, Any]], now: datetime
    ) -> set[Key]:
        rows = [
            {
                "channel_id": channel,
                "message_ts": ts,
                "event_id": event_id,
                "status": RECEIVED,
                "holder": self.holder,
                "lease_until": now + LEASE,
                "question": question,
                "created_at": now,
                "updated_at": now,
            }
            for (channel, ts), (event_id, question) in events.items()
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
        # one UPDATE decides, so two retries (or a retry and a sweep) cannot both win; the
        # question kept by the first delivery stays
        taken = await connection.execute(
            update(SlackEventRow)
            .where(
                _KEY.in_(keys),
                or_(
                    SlackEventRow.status == FAILED,
                    and_(SlackEventRow.status == RECEIVED, SlackEventRow.lease_until < now),
                ),
            )
            .values(status=RECEIVED, holder=self.holder, lease_until=now + LEASE, updated_at=now)
            .returning(SlackEventRow.channel_id, SlackEventRow.message_ts)
        )
        return {(channel, ts) for channel, ts in taken}

    async def _keep_replies(self, items: list[tuple[Key, dict[str, Any]]]) -> list[bool]:
        now = utcnow()
        keys = [key for key, _ in items]
        async with self._turns.begin() as connection:
            # one statement for the batch (not one a reply), then which of them are ours
            await connection.execute(
                update(SlackEventRow)
                .where(
                    SlackEventRow.channel_id == bindparam("channel"),
                    SlackEventRow.message_ts == bindparam("ts"),
                    self._held_here,
                    SlackEventRow.status == RECEIVED,
                )
                .values(status=STORED, reply=bindparam("kept"), updated_at=now),
                [{"channel": channel, "ts": ts, "kept": reply} for (channel, ts), reply in items],
            )
            kept = await connection.execute(
                select(SlackEventRow.channel_id, SlackEventRow.message_ts).where(
                    _KEY.in_(keys), self._held_here, SlackEventRow.status == STORED
                )
            )
            ours = {(channel, ts) for channel, ts in kept}
        return [key in ours for key in keys]

    async def _release_all(self, items: list[tuple[Key, str]]) -> list[None]:
        now = utcnow()
        done = [key for key, status in items if status == DONE]
        failed = [key for key, status in items if status == FAILED]
        handed_back = [key for key, status in items if status == HANDED_BACK]
        async with self._turns.begin() as connection:
            if (done or failed) and self._queues_shared:
                # a place still kept in line (the turn never began) would hold the channel up
                await connection.execute(
                    delete(ChannelTicket).where(
                        _PLACE.in_(done + failed), ChannelTicket.holding.is_(False)
                    )
                )
            if done:
                await connection.execute(
                    update(SlackEventRow)
                    .where(_KEY.in_(done), self._held_here)
                    .values(status=DONE, lease_until=None, updated_at=now)
                )
            if failed:
                await connection.execute(
                    update(SlackEventRow)
                    .where(_KEY.in_(failed), self._held_here, SlackEventRow.status == RECEIVED)
                    .values(status=FAILED, lease_until=None, updated_at=now)
                )
            if handed_back:
                await connection.execute(
                    update(SlackEventRow)
                    .where(_KEY.in_(handed_back), self._held_here, SlackEventRow.status.in_(LIVE))
                    .values(lease_until=now, updated_at=now)
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
        # let the requests already read in submit first: a burst then starts with one
        # batch, not with its first request alone (whose round trips would wait behind the
        # rest being read in)
        await asyncio.sleep(0)
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
