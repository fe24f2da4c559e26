"""Worker: the bot's jobs (bot.jobs) as Slack sees them, after Slack got its ack.

* A question: the :eyes: reaction (the progress reaction) goes on as soon as it is
  acknowledged (``acknowledged``); when its job runs it is answered (Delivery), then the
  reaction comes off. A question taken over from a process that died first has that
  process's step message deleted.
* A change: a message deleted or edited in Slack is deleted or edited in the history too
  (a stopped turn whose question was deleted expires, and its card says so); a channel
  deleted in Slack is forgotten whole.
* A press: see Approvals; of the feedback buttons, see bot.slack.feedback.
* Channel names (for the admin pages) are asked of Slack once per channel and process,
  after its first answer, one at a time at conversations.info's pace (a Tier 3 method: 50
  or so a minute), so a burst of new channels neither waits for them nor trips the limit.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from bot.agent.conversations import Conversations
from bot.agent.sessions import Sessions
from bot.agent.threads import Threads
from bot.errors import StoreError
from bot.jobs import Job
from bot.jobs.runner import Jobs
from bot.slack.approvals import Approvals
from bot.slack.cards import FEEDBACK
from bot.slack.delivery import Delivery
from bot.slack.events import (
    CHANGE,
    PRESS,
    QUESTION,
    ChannelGone,
    Deletion,
    Edit,
    Question,
    change_of,
)
from bot.slack.feedback import give_feedback
from bot.slack.poster import Poster
from bot.slack.presses import Press

log = logging.getLogger(__name__)

#: one conversations.info at most this often (Slack's Tier 3: 50 or more a minute)
NAME_EVERY_S = 1.2
#: the job's note: the ts of its live step message, once posted
STEP_MESSAGE = "step_ts"
#: what a card says once the question it came from was deleted
QUESTION_DELETED = ":wastebasket: The question was deleted, so nothing was done."

Key = tuple[str, str]


class Worker:
    """Does the jobs of the inbox (``jobs.start(worker)``)."""

    def __init__(
        self,
        delivery: Delivery,
        approvals: Approvals,
        sessions: Sessions,
        jobs: Jobs,
        threads: Threads,
    ) -> None:
        self.delivery = delivery
        self.approvals = approvals
        self.conversations: Conversations = delivery.conversations
        self.poster: Poster = delivery.poster
        self.sessions = sessions
        self.jobs = jobs
        #: whom the bot answered in which thread (their replies there are follow-ups)
        self.threads = threads
        #: the progress reactions being put up, by question
        self._signs: dict[Key, asyncio.Task[None]] = {}
        #: channels whose name this process has asked Slack for, or will
        self._named: set[str] = set()
        self._to_name: collections.deque[str] = collections.deque()
        self._namer: asyncio.Task[None] | None = None
        self._last_named = float("-inf")

    def acknowledged(self, question: Question) -> None:
        """A question was taken on: show that the bot is working on it (a follow-up once
        its job knows it is one)."""
        if not question.follow_up:
            self._show_progress(question)
            self.delivery.read_early(question)

    async def __call__(self, job: Job) -> bool:
        if job.kind == QUESTION:
            return await self._answer(job, Question.from_dict(job.payload))
        if job.kind == CHANGE:
            return await self._follow(job)
        if job.kind == PRESS:
            press = Press.from_dict(job.payload)
            if press.action == FEEDBACK:
                return await give_feedback(self.sessions, self.poster, press)
            return await self.approvals.press(press, resumed=job.resumed)
        log.warning("job %s in %s of unknown kind %r: dropped", job.key, job.channel, job.kind)
        return True

    async def close(self) -> None:
        """After the jobs stopped: the progress reactions still on come off, the namer and
        the early thread reads not taken stop."""
        for key in list(self._signs):
            channel, ts = key
            await self._end_progress(channel, ts)
        await self.delivery.close()
        if self._namer is not None:
            self._namer.cancel()
            await asyncio.gather(self._namer, return_exceptions=True)

    async def _answer(self, job: Job, question: Question) -> bool:
        if question.follow_up:
            if not await self._follows_up(question):
                return True  # a reply for the others in the thread: context, if anything
            self._show_progress(question)
        if job.resumed:
            self._show_progress(question)  # the person sees it being worked on again
            dead = job.notes.get(STEP_MESSAGE)
            if dead:  # the dead process's live step message
                await self.poster.delete(question.channel, dead)

        async def posted(ts: str) -> None:
            await self.jobs.note(job, {STEP_MESSAGE: ts})

        answered = False
        try:
            answered = await self.delivery.answer(question, resumed=job.resumed, on_posted=posted)
        except asyncio.CancelledError:
            raise  # stopped at shutdown: another process (or the next start) takes it over
        except Exception:
            # the core never raises for model, tool or database failures: this is a bug
            log.exception("answering %s in %s failed", question.ts, question.channel)
            await self.poster.failed(question.thread)
        finally:
            await asyncio.shield(self._end_progress(question.channel, question.ts))
        if answered:
            await self._answered_in(question)
            self._learn_name(question.channel)
        return answered

    async def _answered_in(self, question: Question) -> None:
        """The bot answered the asker in a channel's thread: their replies there are
        follow-ups (not in a DM, nor in the assistant pane)."""
        user, thread = question.incoming.user_id, question.thread
        if not user or question.pane or thread.channel.startswith("D") or not thread.thread_ts:
            return
        try:
            await self.threads.answered(thread.channel, thread.thread_ts, user)
        except StoreError:
            log.warning("could not store that %s was answered in a thread", thread.channel)

    async def _follows_up(self, question: Question) -> bool:
        """Whether a reply without a mention asks the bot: it answered its author there."""
        user, thread_ts = question.incoming.user_id, question.thread_ts
        if not (user and thread_ts):
            return False
        try:
            return await self.threads.follows_up(question.channel, thread_ts, user)
        except StoreError:
            log.warning("could not tell whether %s in %s follows up", question.ts, question.channel)
            return False

    async def _follow(self, job: Job) -> bool:
        change = change_of(job.payload)
        what = "channel" if isinstance(change, ChannelGone) else f"message {change.ts} in"
        done = "edited" if isinstance(change, Edit) else "deleted"
        try:
            changed = await self._change(change)
        except StoreError:
            log.exception(
                "%s %s was %s in Slack but not in the stored history", what, job.channel, done
            )
            return False
        log.info("%s %s %s: %d stored message(s)", what, job.channel, done, changed)
        return True

    async def _change(self, change: Edit | Deletion | ChannelGone) -> int:
        """The stored history follows Slack; how many stored messages changed."""
        if isinstance(change, Edit):
            return await self.conversations.edit(change.channel, change.ts, change.text)
        if isinstance(change, ChannelGone):  # all that is kept of it: history, turns, jobs
            forgotten = await self.sessions.delete(change.channel)
            await self.jobs.forget_channel(change.channel)
            return forgotten
        deleted, withdrawn = await self.conversations.delete(change.channel, change.ts)
        await self.jobs.forget(change.channel, change.ts)
        for turn in withdrawn:  # its card showed what the model made of the question
            card = turn.card
            if card is not None:
                await self.poster.update(card["channel"], card["ts"], QUESTION_DELETED)
        return deleted

    def _show_progress(self, question: Question) -> None:
        key = (question.channel, question.ts)
        if key not in self._signs:
            self._signs[key] = asyncio.create_task(self.delivery.working(question))

    async def _end_progress(self, channel: str, ts: str) -> None:
        sign = self._signs.pop((channel, ts), None)
        if sign is not None:
            await asyncio.gather(sign, return_exceptions=True)  # on before it comes off
        await self.poster.remove_reaction(channel, ts)

    def _learn_name(self, channel: str) -> None:
        """Once per channel and process, after an answer (a DM has no name)."""
        if channel in self._named or channel.startswith("D"):
            return
        self._named.add(channel)
        self._to_name.append(channel)
        if self._namer is None or self._namer.done():
            self._namer = asyncio.create_task(self._learn_names())

    async def _learn_names(self) -> None:
        loop = asyncio.get_running_loop()
        while self._to_name:
            await asyncio.sleep(self._last_named + NAME_EVERY_S - loop.time())
            self._last_named = loop.time()
            channel = self._to_name.popleft()
            name = await self.poster.channel_name(channel)
            if name is None:
                continue
            try:
                await self.sessions.name(channel, name)
            except StoreError:
                log.warning("could not store the name of %s", channel)
