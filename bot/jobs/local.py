"""LocalJobs: the jobs of one process (SQLite). Each channel has a queue, ordered by key
(Slack's order), and one task that works through it; work outside the inbox (``hold``)
takes its place in the queue too. No leases: a job left queued belongs to the last run, and
``start`` takes it over."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from bot.jobs import Handler, Job
from bot.jobs.inbox import Inbox
from bot.jobs.runner import Jobs

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Turn:
    """A place in a channel's queue: when ``go`` is set, the channel is its holder's until
    ``done`` is set."""

    key: str
    order: int
    go: asyncio.Event = field(default_factory=asyncio.Event, compare=False)
    done: asyncio.Event = field(default_factory=asyncio.Event, compare=False)


class LocalJobs(Jobs):
    def __init__(self, inbox: Inbox) -> None:
        super().__init__(inbox)
        self._queues: dict[str, list[_Turn]] = {}
        self._order = itertools.count()
        #: the tasks working through the queues (held: a loop keeps only weak references)
        self._workers: set[asyncio.Task[None]] = set()

    async def start(self, handler: Handler) -> None:
        await super().start(handler)
        left = await self.inbox.left_over()
        if left:
            log.warning("taking over %d job(s) the last run left", len(left))
        for job in left:  # before anything new: they take their places first
            self._dispatch(job)

    @contextlib.asynccontextmanager
    async def _channel(self, channel: str, job: Job | None) -> AsyncIterator[None]:
        place = _Turn(job.key if job is not None else f"{time.time():.6f}", next(self._order))
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = []
            worker = asyncio.create_task(self._work_through(channel, queue))
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        heapq.heappush(queue, place)
        try:
            await place.go.wait()
            yield
        finally:
            place.done.set()

    async def _work_through(self, channel: str, queue: list[_Turn]) -> None:
        """Let the channel's places go one at a time, the first in key order first."""
        try:
            while queue:
                await self._after_submissions()
                place = heapq.heappop(queue)
                place.go.set()
                await place.done.wait()
        finally:
            del self._queues[channel]
