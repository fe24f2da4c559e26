"""The durable work of a channel: each Slack message is done once, in its channel's order,
even when a process dies.

A shell *submits* a job (a question to answer, an edit or deletion to follow, a button
press) into the **inbox**, a table keyed by (channel, key): the **dedupe key** is the Slack
ts, so a retry or a second delivery of the same message meets the first and is dropped. A
job is done by a *handler* once it holds its channel: jobs of one channel run one at a
time, first in, first out (by key across processes). A job's holder keeps a **lease** on
it, renewed by a **heartbeat**; when a holder dies its lease runs out and another process
**takes the job over** (``Job.resumed``), with the notes its holder left (``Jobs.note``).
Whatever the handler writes elsewhere must let it be resumed: the turn's journal does.

    queued --(handler: done)--> done
    queued --(handler: failed)--> failed --(a Slack retry)--> queued, resumed
    queued, lease run out --(takeover)--> queued, resumed (PostgreSQL)
    queued, left by the last run --(start)--> queued, resumed (SQLite)

Two backends behind one interface: ``LocalJobs`` for SQLite (one process: a lock per
channel, the inbox, and a restart resumes what the last run left; no leases) and
``PostgresJobs`` for several processes (leases, a holds table as the channel mutex, a sweep
with SKIP LOCKED). ``open_jobs`` picks the one DATABASE_URL calls for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from bot.errors import BotError

if TYPE_CHECKING:
    from bot.jobs.runner import Jobs
    from bot.store.db import Engines


@dataclass(frozen=True)
class Job:
    """One unit of a channel's work. ``key`` is its dedupe key within the channel (a Slack
    ts) and its place in the channel's order; ``kind`` and ``payload`` are the shell's."""

    channel: str
    key: str
    kind: str
    payload: dict[str, Any]
    event_id: str | None = None
    #: what its holder recorded while doing it (see Jobs.note)
    notes: dict[str, Any] = field(default_factory=dict)
    #: taken over: its first holder died (or failed, or the last run left it)
    resumed: bool = False

    def with_(self, **changes: Any) -> Job:
        return replace(self, **changes)


#: does a job; True when it is done for good, False when a Slack retry may do it again
Handler = Callable[[Job], Awaitable[bool]]


class ShuttingDown(BotError):
    """The process takes no new work: Slack should deliver it again (to another process,
    or to this one's next start)."""


def open_jobs(engines: Engines) -> Jobs:
    """The jobs of DATABASE_URL's backend."""
    from bot.jobs.inbox import Inbox

    inbox = Inbox(engines)
    if engines.dialect == "postgresql":
        from bot.jobs.postgres import PostgresJobs

        return PostgresJobs(inbox)
    from bot.jobs.local import LocalJobs

    return LocalJobs(inbox)
