"""PostgresJobs: the jobs of several processes on one PostgreSQL.

* A job is held with a lease that its process's heartbeat renews every RENEW_EVERY; a
  lease not renewed for LEASE belongs to a dead process, and the sweep of any process
  (every TAKE_OVER_EVERY) takes the job over: one UPDATE with SKIP LOCKED decides who.
* A channel is held by a row of ``channel_holds`` (the row is the mutex): one conditional
  upsert takes it when nobody holds it (or the holder's lease ran out) and no job of the
  channel that comes before this one is still queued, so the channel's jobs run one at a
  time in key order, whichever process has each. A job waiting for its channel asks again
  after a short, growing pause (a query, not a held connection).
* Done or failed, a job leaves its channel and records its end in one statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Executable, and_, bindparam, delete, select, text, tuple_, update
from sqlalchemy.exc import DBAPIError

from bot.errors import StoreError
from bot.jobs import Handler, Job
from bot.jobs.inbox import QUEUED, Inbox, Key, job_from
from bot.jobs.runner import Jobs
from bot.messages import utcnow
from bot.store.db import run_sync, store_errors
from bot.store.models import ChannelHoldRow, InboxRow

log = logging.getLogger(__name__)

#: a lease not renewed for this long belongs to a dead process
LEASE = timedelta(seconds=30)
#: holders renew their leases this often
RENEW_EVERY = timedelta(seconds=10)
#: every process looks for the jobs of dead holders this often: a job lost with its
#: process is taken up again within LEASE + TAKE_OVER_EVERY
TAKE_OVER_EVERY = timedelta(seconds=5)
#: jobs one process takes over at a time; more wait for the next sweep (any process's)
TAKE_OVER_BATCH = 50
#: waiting for a channel: the first and the longest pause between two tries
FIRST_TRY_S, LONGEST_PAUSE_S = 0.02, 0.25

_INBOX = InboxRow.__table__
_HOLDS = ChannelHoldRow.__table__
_KEY = tuple_(_INBOX.c.channel_id, _INBOX.c.key)

_TAKE_CHANNEL = text(
    """
    INSERT INTO channel_holds (channel_id, holder, key, lease_until)
    SELECT CAST(:channel AS VARCHAR), CAST(:holder AS VARCHAR), CAST(:key AS VARCHAR),
           CAST(:lease AS TIMESTAMPTZ)
    WHERE NOT EXISTS (
        SELECT FROM inbox
        WHERE channel_id = :channel AND status = 'queued' AND key < :key
    )
    ON CONFLICT (channel_id) DO UPDATE
    SET holder = excluded.holder, key = excluded.key, lease_until = excluded.lease_until
    WHERE channel_holds.lease_until < :now
       OR (channel_holds.holder = excluded.holder AND channel_holds.key = excluded.key)
    RETURNING channel_id
    """
)
_LEAVE = delete(_HOLDS).where(
    _HOLDS.c.channel_id == bindparam("channel"),
    _HOLDS.c.holder == bindparam("holder"),
    _HOLDS.c.key == bindparam("key"),
)
_RENEW_HOLD = (
    update(_HOLDS)
    .where(_HOLDS.c.channel_id == bindparam("channel"), _HOLDS.c.key == bindparam("key"))
    .values(lease_until=bindparam("lease"))
)
_LEAVE_AND_FINISH = text(
    """
    WITH left_channel AS (
        DELETE FROM channel_holds
        WHERE channel_id = :channel AND holder = :holder AND key = :key
    )
    UPDATE inbox SET status = :status, lease_until = NULL, updated_at = :now
    WHERE channel_id = :channel AND key = :key AND holder = :holder
    """
)


class PostgresJobs(Jobs):
    def __init__(self, inbox: Inbox) -> None:
        super().__init__(inbox)
        #: single statements, each its own transaction: one round trip, no BEGIN and COMMIT
        self._autocommit = self.inbox.engines.ledger.execution_options(isolation_level="AUTOCOMMIT")
        #: jobs whose end left their channel already
        self._left: set[Key] = set()
        self._arrivals: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._sweeper: asyncio.Task[None] | None = None
        #: holds outside the inbox being renewed (held past RENEW_EVERY)
        self._renewing: dict[Key, asyncio.Task[None]] = {}

    def _lease(self) -> datetime | None:
        return utcnow() + LEASE

    async def start(self, handler: Handler) -> None:
        await super().start(handler)
        self._sweeper = asyncio.create_task(self._sweep())
        self._helpers += [asyncio.create_task(self._renew_leases()), self._sweeper]

    async def take_over_abandoned(self) -> int:
        """Take on the jobs of processes that died (their lease ran out). How many."""
        if not self.accepting:
            return 0
        jobs = await self._take_over()
        for job in jobs:
            log.warning("taking over %s in %s: its process died", job.key, job.channel)
            self._dispatch(job)
        return len(jobs)

    @contextlib.asynccontextmanager
    async def _channel(self, channel: str, job: Job | None) -> AsyncIterator[None]:
        if job is not None:
            async with self._holding(channel, job.key, job):
                yield
            return
        # work outside the inbox has no key of its own: in arrival order in this process
        lock = self._arrivals.setdefault(channel, asyncio.Lock())
        async with lock, self._holding(channel, f"{time.time():.6f}", None):
            yield

    @contextlib.asynccontextmanager
    async def _holding(self, channel: str, key: str, job: Job | None) -> AsyncIterator[None]:
        await self._after_submissions()
        pause = FIRST_TRY_S
        while not await self._take_channel(channel, key):
            await asyncio.sleep(pause)
            pause = min(pause * 1.5, LONGEST_PAUSE_S)
        # a job's lease is renewed with the process's others; a hold for work outside the
        # inbox (a CLI process has no heartbeat) is renewed while it is held, if that long
        renewer = None
        if job is None:
            renewer = asyncio.get_running_loop().call_later(
                RENEW_EVERY.total_seconds(), self._renew_hold, channel, key
            )
        try:
            yield
        finally:
            if renewer is not None:
                renewer.cancel()
                renewing = self._renewing.pop((channel, key), None)
                if renewing is not None:
                    renewing.cancel()
            # a job's end leaves the channel with it (see _finished); this is for the rest
            if (channel, key) not in self._left:
                await asyncio.shield(self._leave(channel, key))
            self._left.discard((channel, key))

    async def _finished(self, job: Job, done: bool) -> None:
        await self._leave_and_finish(job, done)
        self._left.add((job.channel, job.key))

    async def _stopping(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()

    async def _handed_back(self, keys: list[Key]) -> None:
        try:
            await self.inbox.hand_back(keys)
        except StoreError as exc:
            log.warning("could not hand back %d job(s) (%s): their leases run out", len(keys), exc)

    @store_errors
    async def _take_channel(self, channel: str, key: str) -> bool:
        now = utcnow()
        params = {
            "channel": channel,
            "holder": self.inbox.holder,
            "key": key,
            "lease": now + LEASE,
            "now": now,
        }
        return await self._on_ledger(_TAKE_CHANNEL, params, scalar=True) is not None

    @store_errors
    async def _leave_and_finish(self, job: Job, done: bool) -> None:
        params = {
            "channel": job.channel,
            "key": job.key,
            "holder": self.inbox.holder,
            "status": "done" if done else "failed",
            "now": utcnow(),
        }
        await self._on_ledger(_LEAVE_AND_FINISH, params)

    async def _leave(self, channel: str, key: str) -> None:
        # a connection lost mid-statement (a PostgreSQL restart) is replaced and the
        # statement run again (_on_ledger): the channel is not left held for a lease
        try:
            await self._on_ledger(
                _LEAVE, {"channel": channel, "holder": self.inbox.holder, "key": key}
            )
        except Exception as exc:
            log.warning(
                "could not leave channel %s (%s); its hold expires by itself",
                channel,
                type(exc).__name__,
            )

    async def _on_ledger(
        self, statement: Executable, params: dict[str, Any], scalar: bool = False
    ) -> Any:
        """Run one statement of the ledger (each is idempotent). The ledger's pool pings no
        connection before use (see bot.store.db.create_engines): a statement that finds its
        connection ended by a server restart fails, the pool is replaced, and the statement
        is run once more on a new connection."""
        try:
            return await self._run_on_ledger(statement, params, scalar)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        return await self._run_on_ledger(statement, params, scalar)

    async def _run_on_ledger(
        self, statement: Executable, params: dict[str, Any], scalar: bool
    ) -> Any:
        def run(connection: Connection) -> Any:
            result = connection.execute(statement, params)
            return result.scalar() if scalar else None

        return await run_sync(self._autocommit, run)

    @store_errors
    async def _take_over(self) -> list[Job]:
        now = utcnow()
        abandoned = and_(
            _INBOX.c.status == QUEUED,
            _INBOX.c.lease_until < now,
            _INBOX.c.payload.is_not(None),
            _INBOX.c.holder != self.inbox.holder,
        )
        # a read first: the usual sweep finds nothing, and then writes nothing
        async with self.inbox.engines.reads.connect() as connection:
            if await connection.scalar(select(_INBOX.c.key).where(abandoned).limit(1)) is None:
                return []
        # racing sweeps skip each other's rows rather than wait for them; the UPDATE checks
        # `abandoned` again on the row it locked, so a row renewed meanwhile stays put
        candidates = (
            select(_INBOX.c.channel_id, _INBOX.c.key)
            .where(abandoned)
            .order_by(_INBOX.c.key)
            .limit(TAKE_OVER_BATCH)
            .with_for_update(skip_locked=True)
        )
        async with self.inbox.engines.writes.begin() as connection:
            rows = await connection.execute(
                update(_INBOX)
                .where(_KEY.in_(candidates), abandoned)
                .values(holder=self.inbox.holder, lease_until=now + LEASE, updated_at=now)
                .returning(_INBOX)
            )
            return sorted((job_from(row) for row in rows), key=lambda job: job.key)

    @store_errors
    async def _renew(self) -> None:
        now = utcnow()
        keys = list(self._tasks)
        async with self.inbox.engines.writes.begin() as connection:
            if keys:
                await connection.execute(
                    update(_INBOX)
                    .where(_KEY.in_(keys), _INBOX.c.holder == self.inbox.holder)
                    .values(lease_until=now + LEASE, updated_at=now)
                )
            await connection.execute(
                update(_HOLDS)
                .where(_HOLDS.c.holder == self.inbox.holder)
                .values(lease_until=now + LEASE)
            )

    def _renew_hold(self, channel: str, key: str) -> None:
        """A hold outside the inbox, still held: renewed now and every RENEW_EVERY after."""
        self._renewing[(channel, key)] = asyncio.create_task(self._keep_holding(channel, key))

    async def _keep_holding(self, channel: str, key: str) -> None:
        held = {"channel": channel, "key": key}
        while True:
            try:
                await self._on_ledger(_RENEW_HOLD, {**held, "lease": utcnow() + LEASE})
            except Exception as exc:  # tried again at the next beat
                log.warning("could not renew the hold on %s (%s)", channel, type(exc).__name__)
            await asyncio.sleep(RENEW_EVERY.total_seconds())

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(RENEW_EVERY.total_seconds())
            try:
                await self._renew()
            except StoreError as exc:
                log.warning("could not renew the leases of %d job(s) (%s)", len(self._tasks), exc)

    async def _sweep(self) -> None:
        while True:
            try:
                await self.take_over_abandoned()
            except StoreError as exc:
                log.warning("could not look for the jobs of dead processes (%s)", exc)
            await asyncio.sleep(TAKE_OVER_EVERY.total_seconds())
