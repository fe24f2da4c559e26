"""Inbox: the table of jobs, keyed by (channel, key), and the statements on it that both
backends share. Only bot.jobs writes it."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Collection
from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, or_, select, tuple_, update

from bot.jobs import Job
from bot.messages import utcnow
from bot.store.db import Engines, insert_for, store_errors
from bot.store.group_commit import GroupCommit
from bot.store.models import InboxRow

QUEUED = "queued"
DONE = "done"
FAILED = "failed"

_INBOX = InboxRow.__table__
_KEY = tuple_(_INBOX.c.channel_id, _INBOX.c.key)

Key = tuple[str, str]

# (named apart from the columns: a bindparam named after one is the value it is set to)
_MINE = (
    (_INBOX.c.channel_id == bindparam("of_channel"))
    & (_INBOX.c.key == bindparam("of_key"))
    & (_INBOX.c.holder == bindparam("of_holder"))
)
_FINISH = (
    update(_INBOX)
    .where(_MINE)
    .values(status=bindparam("to_status"), lease_until=None, updated_at=bindparam("at"))
)
_NOTE = update(_INBOX).where(_MINE).values(notes=bindparam("to_notes"), updated_at=bindparam("at"))


class Added(Enum):
    """What submitting a job did."""

    NEW = "new"
    #: it was there, failed or abandoned: now it is this process's, to do again
    TAKEN_OVER = "taken over"
    #: it was there already, and is (or was) done by its holder
    DUPLICATE = "duplicate"


class Inbox:
    """The jobs table, for one process (``holder``)."""

    def __init__(self, engines: Engines) -> None:
        self.engines = engines
        #: names this process on the jobs it holds
        self.holder = uuid.uuid4().hex
        # given every row, SQLAlchemy's "insertmanyvalues" sends one INSERT from its cached
        # compilation, where ``.values(rows)`` would compile one afresh each time
        # speed device: see bench/README.md, "inbox INSERT compiled once"
        self._insert_new = (
            insert_for(self.engines.dialect)(_INBOX)
            .on_conflict_do_nothing(index_elements=["channel_id", "key"])
            .returning(_INBOX.c.channel_id, _INBOX.c.key)
        )
        self._adding = GroupCommit(self._add_all)
        self._finishing = GroupCommit(functools.partial(self._change_all, _FINISH))
        self._noting = GroupCommit(functools.partial(self._change_all, _NOTE))

    async def add(self, job: Job, lease_until: datetime | None) -> tuple[Added, Job]:
        """Put ``job`` in the inbox, or take over the one there if it failed or its holder's
        lease ran out (``lease_until`` None: this process's jobs have no lease, as on
        SQLite, where a job without one is this process's, or left by its last run).

        Jobs submitted while the inbox is writing go in together, in one statement (group
        commit)."""
        # speed device: see bench/README.md, "group commit"
        return await self._adding.submit((job, lease_until))

    @store_errors
    async def _add_all(self, items: list[tuple[Job, datetime | None]]) -> list[tuple[Added, Job]]:
        now = utcnow()
        rows = {(job.channel, job.key): self._row(job, lease, now) for job, lease in items}

        def work(connection: Connection) -> list[tuple[Added, Job]]:
            inserted = connection.execute(self._insert_new, list(rows.values()))
            new = {(row.channel_id, row.key) for row in inserted}
            results, seen = [], set()
            for job, lease in items:
                key = (job.channel, job.key)
                if key in seen:  # the same message twice in one batch: the first has it
                    results.append((Added.DUPLICATE, job))
                elif key in new:
                    results.append((Added.NEW, job))
                else:
                    results.append(self._take_over(connection, job, lease, now))
                seen.add(key)
            return results

        return await self.engines.statement(work)

    def _row(self, job: Job, lease_until: datetime | None, now: datetime) -> dict[str, Any]:
        return {
            "channel_id": job.channel,
            "key": job.key,
            "kind": job.kind,
            "event_id": job.event_id,
            "payload": job.payload,
            "status": QUEUED,
            "holder": self.holder,
            "lease_until": lease_until,
            "created_at": now,
            "updated_at": now,
        }

    def _take_over(
        self, connection: Connection, job: Job, lease_until: datetime | None, now: datetime
    ) -> tuple[Added, Job]:
        # seen before: a Slack retry, or the same message delivered twice; one UPDATE
        # decides, so two retries (or a retry and a sweep) cannot both win
        abandoned = or_(
            _INBOX.c.status == FAILED,
            and_(_INBOX.c.status == QUEUED, _INBOX.c.lease_until < now),
        )
        take_over = (
            update(_INBOX)
            .where(_KEY == (job.channel, job.key), abandoned)
            .values(status=QUEUED, holder=self.holder, lease_until=lease_until, updated_at=now)
            .returning(_INBOX)
        )
        taken = connection.execute(take_over).first()
        return (Added.DUPLICATE, job) if taken is None else (Added.TAKEN_OVER, job_from(taken))

    async def finish(self, job: Job, *, done: bool) -> None:
        """``done``: never again; else failed, and a Slack retry may do it again. Jobs that
        finish while others' ends are being written are written together (group commit;
        with the notes, and the turns' journals: see TurnStore.journal for the figures)."""
        await self._finishing.submit(self._mine(job) | {"to_status": DONE if done else FAILED})

    async def note(self, job: Job, notes: dict[str, Any]) -> None:
        """Keep ``notes`` with the job (written together with others', like ``finish``)."""
        await self._noting.submit(self._mine(job) | {"to_notes": notes})

    def _mine(self, job: Job) -> dict[str, Any]:
        return {
            "of_channel": job.channel,
            "of_key": job.key,
            "of_holder": self.holder,
            "at": utcnow(),
        }

    @store_errors
    async def _change_all(self, statement: Any, changes: list[dict[str, Any]]) -> list[None]:
        """One UPDATE of the changes, each a job of this process (a job gone changes none)."""
        await self.engines.statement(lambda connection: connection.execute(statement, changes))
        return [None] * len(changes)

    @store_errors
    async def forget(self, channel: str, key: str) -> None:
        """The message was deleted in Slack: a finished job keeps no copy of it (one still
        to do needs its copy, should its holder die)."""
        statement = (
            update(_INBOX)
            .where(_KEY == (channel, key), _INBOX.c.status.in_((DONE, FAILED)))
            .values(payload=None, notes=None)
        )
        await self.engines.statement(lambda connection: connection.execute(statement))

    @store_errors
    async def forget_channel(self, channel: str) -> None:
        """The channel was deleted in Slack: its finished jobs keep no copy of what was sent
        (their keys stay, so a late retry is still known, until ``forget_before``)."""
        statement = (
            update(_INBOX)
            .where(_INBOX.c.channel_id == channel, _INBOX.c.status.in_((DONE, FAILED)))
            .values(payload=None, notes=None)
        )
        await self.engines.statement(lambda connection: connection.execute(statement))

    @store_errors
    async def left_over(self) -> list[Job]:
        """Every job still queued by another holder (the last run, on SQLite), now this
        process's, in order."""
        statement = (
            update(_INBOX)
            .where(
                _INBOX.c.status == QUEUED,
                _INBOX.c.payload.is_not(None),
                _INBOX.c.holder != self.holder,
            )
            .values(holder=self.holder, updated_at=utcnow())
            .returning(_INBOX)
        )
        rows = await self.engines.statement(lambda c: c.execute(statement).all())
        return sorted((job_from(row) for row in rows), key=lambda job: job.key)

    @store_errors
    async def hand_back(self, keys: Collection[Key]) -> None:
        """Jobs this process stops before they were done: their leases end now."""
        if not keys:
            return
        now = utcnow()
        statement = (
            update(_INBOX)
            .where(_KEY.in_(list(keys)), _INBOX.c.holder == self.holder, _INBOX.c.status == QUEUED)
            .values(lease_until=now, updated_at=now)
        )
        await self.engines.statement(lambda connection: connection.execute(statement))

    @store_errors
    async def status(self, channel: str, key: str) -> str | None:
        async with self.engines.reads.connect() as connection:
            return await connection.scalar(select(_INBOX.c.status).where(_KEY == (channel, key)))

    @store_errors
    async def forget_before(self, moment: datetime) -> int:
        """Drop jobs untouched since ``moment``: finished ones (Slack stops retrying minutes
        after an event), and any left with no payload to do them from."""
        statement = delete(_INBOX).where(
            _INBOX.c.updated_at < moment,
            or_(_INBOX.c.status != QUEUED, _INBOX.c.payload.is_(None)),
        )
        return await self.engines.statement(lambda c: c.execute(statement).rowcount or 0)


def job_from(row: Any) -> Job:
    return Job(
        channel=row.channel_id,
        key=row.key,
        kind=row.kind,
        payload=row.payload or {},
        event_id=row.event_id,
        notes=row.notes or {},
        resumed=True,
    )
