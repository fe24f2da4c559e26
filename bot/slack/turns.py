"""TurnRunner: the work that happens after Slack got its acknowledgement.

* Each channel's work (answers, deletions, edits) runs one job at a time in Slack-ts order,
  in a task of its own; across processes the store's channel lock keeps the same order.
* The working sign goes up once the question's turn has begun (its request to the model
  goes out first: under a burst of questions the answers come sooner), or at once when
  other work waits ahead in the channel; at most SIGN_WITHIN_S after the ack either way.
* A burst of events is acknowledged before it is worked on: new work waits (briefly) until
  the requests in hand are answered, so acks stay fast under load.
* A button press runs as a task of its own (see Presses).
* Every task is tracked: shutdown stops taking work, gives what is in flight a bounded time,
  and hands back the claims of what it had to stop (another process takes them over).
  Claims in hand have their leases renewed.
* Channel names (for the admin pages) are asked of Slack once per channel and process, after
  its first answer, one at a time at conversations.info's pace (a Tier 3 method: 50 or so
  a minute), so a burst of new channels neither waits for them nor trips the rate limit.
* Questions of a process that died are taken over (``take_over_abandoned``, which the
  Sweeper calls): answered like any other, or, when their turn was stored, their kept reply
  posted, in the channel's queue like any other work.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from bot.agent.service import Reply
from bot.messages import utcnow
from bot.slack.delivery import Delivery
from bot.slack.events import Deletion, Edit, Press, Question
from bot.slack.presses import Presses
from bot.store.events import RENEW_EVERY, SlackEvents

log = logging.getLogger(__name__)

#: new work waits at most this long for the acknowledgements being sent
ACKS_FIRST_S = 0.5
#: the working sign waits at most this long (after the acks) for its turn to begin
SIGN_WITHIN_S = 0.3
#: finished claims are kept this long (Slack's last retry comes about 5 minutes later)
KEEP_CLAIMS = timedelta(days=1)
FORGET_EVERY_S = 3_600
#: one conversations.info at most this often (Slack's Tier 3: 50 or more a minute)
NAME_EVERY_S = 1.2


@dataclass(frozen=True)
class KeptReply:
    """The reply to ``question``, stored and kept with its claim by a process that died
    before posting it."""

    question: Question
    reply: Reply


Job = Question | KeptReply | Deletion | Edit


@dataclass(frozen=True)
class _Sign:
    """A question's working sign: the task that puts it up, and the event it waits for
    (set when the question's turn has begun)."""

    shown: asyncio.Task[None]
    begun: asyncio.Event


class TurnRunner:
    """Runs answers, deletions and edits after the ack, per channel in order, tracked."""

    def __init__(self, delivery: Delivery, presses: Presses, claims: SlackEvents):
        self.delivery = delivery
        self.presses = presses
        self.claims = claims
        self.accepting = True
        self._tasks: set[asyncio.Task[None]] = set()
        self._queues: dict[str, list[tuple[str, int, Job]]] = {}
        self._order = itertools.count()
        self._signs: dict[tuple[str, str], _Sign] = {}
        self._held: set[tuple[str, str]] = set()
        #: channels whose name this process has asked Slack for, or will
        self._named: set[str] = set()
        self._to_name: collections.deque[str] = collections.deque()
        self._namer: asyncio.Task[None] | None = None
        self._last_named = float("-inf")
        self._keeper: asyncio.Task[None] | None = None
        self._acking = 0
        self._acks_sent = asyncio.Event()
        self._acks_sent.set()

    def start(self) -> None:
        self._keeper = asyncio.create_task(self._keep_claims())

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def answer(self, question: Question) -> None:
        """Answer a question this process has claimed."""
        key = (question.channel, question.ts)
        self._held.add(key)
        begun = asyncio.Event()
        behind = question.channel in self._queues  # the channel's other work goes first
        shown = self._spawn(self._show_working(question, None if behind else begun))
        self._signs[key] = _Sign(shown, begun)
        self._enqueue(question.channel, question.ts, question)

    async def take_over_abandoned(self) -> int:
        """Take on the claims of processes that died: answer the questions whose turn was
        never stored, post the kept replies of the others. How many were taken."""
        if not self.accepting:
            return 0
        taken = await self.claims.take_over_abandoned()
        for claim in taken:
            question = Question.from_dict(claim.question)
            if claim.reply is None:
                log.warning("answering %s in %s: its process died", question.ts, question.channel)
                self.answer(question)
            else:
                log.warning(
                    "posting the answer to %s in %s: its process died before it posted it",
                    question.ts,
                    question.channel,
                )
                self._held.add((question.channel, question.ts))
                kept = KeptReply(question, _reply_from_dict(claim.reply))
                self._enqueue(question.channel, question.ts, kept)
        return len(taken)

    def press(self, press: Press) -> None:
        """A button pressed: its turn goes on (outside the channel's queue: the turn takes
        the channel's lock itself)."""
        self._spawn(self.presses.handle(press))

    def follow(self, change: Deletion | Edit) -> None:
        """A message deleted or edited in Slack is deleted or edited in the stored history
        too (after the work queued before the change, which might store it)."""
        self._enqueue(change.channel, change.event_ts, change)

    async def close(self, drain_s: float) -> None:
        """Take no more work; wait up to ``drain_s`` s for the work in flight, then stop it."""
        self.accepting = False
        if self._tasks:
            log.info("waiting up to %.0f s for %d task(s) in flight", drain_s, len(self._tasks))
            _, pending = await asyncio.wait(set(self._tasks), timeout=drain_s)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("stopped %d task(s) that did not finish in time", len(pending))
                await asyncio.gather(*pending, return_exceptions=True)
        for helper in (self._keeper, self._namer):
            if helper is not None:
                helper.cancel()
                await asyncio.gather(helper, return_exceptions=True)

    @contextlib.contextmanager
    def acknowledging(self) -> Iterator[None]:
        """Around the handling of a request from Slack (see ``_acks_first``)."""
        self._acking += 1
        self._acks_sent.clear()
        try:
            yield
        finally:
            self._acking -= 1
            if not self._acking:
                self._acks_sent.set()

    async def _acks_first(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ACKS_FIRST_S):
                await self._acks_sent.wait()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _enqueue(self, channel: str, ts: str, job: Job) -> None:
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = []
            self._spawn(self._work_through(channel, queue))
        heapq.heappush(queue, (ts, next(self._order), job))

    async def _work_through(self, channel: str, queue: list[tuple[str, int, Job]]) -> None:
        try:
            await self._acks_first()
            while queue:
                _, _, job = heapq.heappop(queue)
                if isinstance(job, Question):
                    await self._answer(job)
                elif isinstance(job, KeptReply):
                    await self._post_kept(job)
                else:
                    await self._follow(job)
        finally:
            del self._queues[channel]
            # stopped at shutdown: handed back, for another process (or this one's
            # successor) to answer, or to post the reply kept with the claim
            never_started = [
                job.question if isinstance(job, KeptReply) else job
                for _, _, job in queue
                if isinstance(job, Question | KeptReply)
            ]
            if never_started:
                await asyncio.shield(
                    asyncio.gather(*(self._sign_off(q, handed_back=True) for q in never_started))
                )

    async def _show_working(self, question: Question, begun: asyncio.Event | None) -> None:
        await self._acks_first()
        if begun is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SIGN_WITHIN_S):
                    await begun.wait()
        await self.delivery.working(question)

    async def _answer(self, question: Question) -> None:
        keep = functools.partial(self._keep, question)
        sign = self._signs.get((question.channel, question.ts))
        begun = sign.begun.set if sign is not None else None
        answer = functools.partial(self.delivery.answer, question, keep, begun)
        await self._settle(question, answer)
        # once per channel and process, after the answer (a DM has no name)
        if question.channel not in self._named and not question.channel.startswith("D"):
            self._named.add(question.channel)
            self._to_name.append(question.channel)
            if self._namer is None or self._namer.done():
                self._namer = asyncio.create_task(self._learn_names())

    async def _learn_names(self) -> None:
        loop = asyncio.get_running_loop()
        while self._to_name:
            await asyncio.sleep(self._last_named + NAME_EVERY_S - loop.time())
            self._last_named = loop.time()
            await self.delivery.learn_channel_name(self._to_name.popleft())

    async def _post_kept(self, kept: KeptReply) -> None:
        async def post() -> bool:
            await self.delivery.post_reply(kept.question.thread, kept.reply)
            return True

        await self._settle(kept.question, post)

    async def _settle(self, question: Question, work: Callable[[], Awaitable[bool]]) -> None:
        """Run ``work`` (whether the turn is stored and posted), then sign off."""
        stored = handed_back = False
        try:
            stored = await work()
        except asyncio.CancelledError:  # stopped at shutdown
            handed_back = True
            raise
        except Exception:
            # the core never raises for model, tool or database failures: this is a bug
            log.exception("answering %s in %s failed", question.ts, question.channel)
            await self.delivery.failed(question)
        finally:
            await asyncio.shield(self._sign_off(question, stored, handed_back=handed_back))

    async def _keep(self, question: Question, reply: Reply) -> bool:
        """Keep the stored reply with the claim before it is posted; False when another
        process took the question over."""
        try:
            return await self.claims.keep_reply(
                question.channel, question.ts, _reply_to_dict(reply)
            )
        except (SQLAlchemyError, OSError):
            # posting beats leaving the person without the answer; the claim stays
            # `received`, so only this process dying before it is `done` answers it again
            log.warning("could not keep the reply to %s in %s", question.ts, question.channel)
            return True

    async def _sign_off(
        self, question: Question, stored: bool = False, *, handed_back: bool = False
    ) -> None:
        """The working sign comes down; the claim is done, or failed (a retry may answer),
        or handed back (stopped at shutdown: another process takes it over)."""
        key = (question.channel, question.ts)
        sign = self._signs.pop(key, None)
        if sign is not None:
            await asyncio.gather(sign.shown, return_exceptions=True)  # up before it comes down
        await self.delivery.finished(question)
        self._held.discard(key)
        try:
            if handed_back:
                await self.claims.hand_back(question.channel, question.ts)
            else:
                await self.claims.finish(question.channel, question.ts, done=stored)
        except (SQLAlchemyError, OSError):
            # the lease runs out by itself; a retry then finds the stored turn, if any
            log.warning("could not release the claim on %s in %s", question.ts, question.channel)

    async def _follow(self, change: Deletion | Edit) -> None:
        conversations = self.delivery.conversations
        done = "edited" if isinstance(change, Edit) else "deleted"
        try:
            if isinstance(change, Edit):
                changed = await conversations.edit(change.channel, change.ts, change.text)
            else:
                changed = await conversations.delete(change.channel, change.ts)
                await self.claims.forget_question(change.channel, change.ts)
        except (SQLAlchemyError, OSError):
            log.exception(
                "message %s in %s was %s in Slack but not in the stored history",
                change.ts,
                change.channel,
                done,
            )
            return
        log.info(
            "message %s %s in %s: %d stored message(s)", change.ts, done, change.channel, changed
        )

    async def _keep_claims(self) -> None:
        loop = asyncio.get_running_loop()
        next_cleanup = loop.time()
        while True:
            try:
                await self.claims.renew(set(self._held))
                if loop.time() >= next_cleanup:
                    next_cleanup = loop.time() + FORGET_EVERY_S
                    await self.claims.forget_before(utcnow() - KEEP_CLAIMS)
            except (SQLAlchemyError, OSError):
                log.warning("could not renew the claims of %d turn(s)", len(self._held))
            await asyncio.sleep(RENEW_EVERY.total_seconds())


def _reply_to_dict(reply: Reply) -> dict[str, Any]:
    """What posting a reply needs (an approval card reads its calls from the stored turn)."""
    return {"text": reply.text, "ok": reply.ok, "outcome": reply.outcome, "turn_id": reply.turn_id}


def _reply_from_dict(data: dict[str, Any]) -> Reply:
    return Reply(data["text"], data["ok"], data["outcome"], data["turn_id"])
