"""Jobs: what both backends share. Submitted jobs are dispatched at once, each in a task
that waits for its channel (``_channel``, the backend's) and runs the handler; every task is
tracked, so shutdown can stop taking work, give what is in flight a bounded time, and stop
the rest."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from bot.errors import StoreError
from bot.jobs import Handler, Job, ShuttingDown
from bot.jobs.inbox import Added, Inbox, Key
from bot.logs import add_log_ids
from bot.messages import utcnow

log = logging.getLogger(__name__)

#: finished jobs are kept this long (Slack's last retry comes about 5 minutes later)
KEEP_FINISHED = timedelta(days=1)
FORGET_EVERY_S = 3_600
#: a job waits at most this long, while other jobs are being taken on, before it starts
BURST_WAIT_S = 0.5


class Jobs:
    """The inbox's jobs, run per channel in order by this process."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        #: false once shutdown began: submit() raises ShuttingDown
        self.accepting = True
        self._handler: Handler | None = None
        #: the jobs in hand, by (channel, key)
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._helpers: list[asyncio.Task[None]] = []
        #: submissions under way; jobs wait for them (see _after_submissions)
        self._submitting = 0
        self._submitted = asyncio.Event()
        self._submitted.set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def start(self, handler: Handler) -> None:
        """Run jobs with ``handler`` from now on, beginning with those to take over."""
        self._handler = handler
        self._helpers.append(asyncio.create_task(self._forget_finished()))

    async def submit(self, job: Job) -> bool:
        """Take ``job`` on (it runs once its channel is free); False when the inbox has it
        already. Raises ShuttingDown, or StoreError when the inbox cannot be written (the
        job is not taken: Slack should deliver it again)."""
        if not self.accepting:
            raise ShuttingDown("shutting down")
        self._submitting += 1
        self._submitted.clear()
        try:
            added, job = await self.inbox.add(job, self._lease())
        finally:
            self._submitting -= 1
            if not self._submitting:
                self._submitted.set()
        if added is Added.DUPLICATE:
            log.info(
                "skipped a second delivery of %s in %s (event %s)",
                job.key,
                job.channel,
                job.event_id,
            )
            return False
        if added is Added.TAKEN_OVER:
            log.warning(
                "taking over %s in %s: its first attempt did not finish", job.key, job.channel
            )
        self._dispatch(job)
        return True

    async def note(self, job: Job, notes: dict[str, object]) -> None:
        """Record ``notes`` with the job, for whoever takes it over (never raises)."""
        try:
            await self.inbox.note(job, notes)
        except StoreError as exc:
            log.warning("could not note %s in %s (%s)", job.key, job.channel, exc)

    async def forget(self, channel: str, key: str) -> None:
        """A message deleted in Slack: its finished job keeps no copy of it."""
        await self.inbox.forget(channel, key)

    async def forget_channel(self, channel: str) -> None:
        """A channel deleted in Slack: its finished jobs keep no copy of what was sent."""
        await self.inbox.forget_channel(channel)

    def hold(self, channel: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The channel, held for work that is not a job of the inbox (``bot ask``)."""
        return self._channel(channel, None)

    async def status(self, channel: str, key: str) -> str | None:
        """A job's status in the inbox (queued, done, failed), or None."""
        return await self.inbox.status(channel, key)

    async def close(self, drain_s: float) -> None:
        """Take no more work; wait up to ``drain_s`` s for the jobs in hand, then stop them:
        they are left for another process (or the next start) to take over."""
        self.accepting = False
        await self._stopping()
        tasks = dict(self._tasks)
        if tasks:
            log.info("waiting up to %.0f s for %d job(s) in hand", drain_s, len(tasks))
            _, pending = await asyncio.wait(set(tasks.values()), timeout=drain_s)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("stopped %d job(s) that did not finish in time", len(pending))
                await asyncio.gather(*pending, return_exceptions=True)
                stopped = [key for key, task in tasks.items() if task in pending]
                await self._handed_back(stopped)
        for task in self._helpers:
            task.cancel()
        await asyncio.gather(*self._helpers, return_exceptions=True)

    # -- for the backends ------------------------------------------------------------------

    async def _after_submissions(self) -> None:
        """Until no job is being taken on (at most BURST_WAIT_S): the jobs of a burst are all in
        before one of them starts, so a channel's start in key order (Slack's order), not in
        the order their deliveries happened to be read."""
        if self._submitted.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(BURST_WAIT_S):
                await self._submitted.wait()

    def _lease(self) -> datetime | None:
        """When a lease taken now runs out (None: the backend has no leases)."""
        return None

    def _channel(
        self, channel: str, job: Job | None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def _finished(self, job: Job, done: bool) -> None:
        await self.inbox.finish(job, done=done)

    async def _stopping(self) -> None:
        """Shutdown began: nothing more is taken over."""

    async def _handed_back(self, keys: list[Key]) -> None:
        """Jobs stopped at shutdown (the backend says how another process gets them)."""

    def _dispatch(self, job: Job) -> None:
        key = (job.channel, job.key)
        task = asyncio.create_task(self._run(job))
        self._tasks[key] = task
        task.add_done_callback(lambda _: self._tasks.pop(key, None))

    async def _run(self, job: Job) -> None:
        assert self._handler is not None, "start() first"
        # the job's own task: its ids are on its log lines (a job taken over has no other)
        add_log_ids(channel=job.channel, event_id=job.event_id)
        async with self._channel(job.channel, job):
            done = False
            try:
                done = await self._handler(job)
            except asyncio.CancelledError:
                raise  # stopped at shutdown: handed back, not failed
            except Exception:
                # the handler never raises for model, tool or database failures: a bug
                log.exception("job %s in %s failed", job.key, job.channel)
            try:
                await asyncio.shield(self._finished(job, done))
            except StoreError as exc:
                # whoever takes it over finds what the handler stored, and goes on from there
                log.warning("could not record the end of %s in %s (%s)", job.key, job.channel, exc)

    async def _forget_finished(self) -> None:
        while True:
            try:
                await self.inbox.forget_before(utcnow() - KEEP_FINISHED)
            except StoreError as exc:
                log.warning("could not forget old jobs (%s)", exc)
            await asyncio.sleep(FORGET_EVERY_S)
