"""Shutting the Slack runtime down, through the real app: no new work, the jobs in hand get
their time, then are stopped and handed back, so that another process (or this one's next
start) answers them."""

from __future__ import annotations

import asyncio
import time

import pytest

from bot.jobs import Job
from bot.jobs.inbox import Inbox
from bot.jobs.postgres import PostgresJobs
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, Database, RunningBot, mention, posts


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    return database_url


async def shut_down(bot: RunningBot, drain_s: float) -> None:
    """What stopping the server does, with ``drain_s`` for the turns in flight; run in the
    bot's own event loop."""
    loop = bot.served._server._loop
    assert loop is not None
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(bot.runtime.stop(drain_s), loop))


async def working_on(bot: RunningBot, fake_slack: FakeSlack, clock: Clock) -> list[str]:
    """Two mentions in C1, once both working signs are up (the second turn waits its turn)."""
    stamps = [clock.ts(), clock.ts()]
    for ts in stamps:
        assert (await bot.send(mention("C1", ts))).status_code == 200
    await fake_slack.wait_for(lambda s: len(s.calls_to("reactions.add")) == 2)
    return stamps


async def test_the_turns_in_flight_finish_and_no_new_one_is_taken(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    fake_openai.latency = 0.3
    stamps = await working_on(bot, fake_slack, clock)

    await shut_down(bot, drain_s=10)

    assert [p["text"] for p in posts(fake_slack, "C1")] == ["You said: hello"] * 2
    assert [await db.inbox.status("C1", ts) for ts in stamps] == ["done", "done"]
    late = clock.ts()
    assert (await bot.send(mention("C1", late))).status_code == 503  # Slack sends it again
    assert await db.inbox.status("C1", late) is None


async def test_what_does_not_finish_in_time_is_stopped_and_handed_back(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    fake_openai.responder = lambda request: Hang(60)
    stamps = await working_on(bot, fake_slack, clock)

    started = time.monotonic()
    await shut_down(bot, drain_s=0.3)

    assert time.monotonic() - started < 5
    assert posts(fake_slack, "C1") == []  # no answer, and no failure notice
    removed = [c.args["timestamp"] for c in fake_slack.calls_to("reactions.remove")]
    assert sorted(removed) == stamps  # the working signs came down
    # nothing was answered: both jobs are handed back, and another process (PostgreSQL) or
    # the next start (SQLite) takes them over, once
    assert [await db.inbox.status("C1", ts) for ts in stamps] == ["queued", "queued"]
    other = Inbox(db.inbox.engines)
    assert sorted(job.key for job in await taken_over(other)) == stamps
    assert await taken_over(other) == []


async def taken_over(inbox: Inbox) -> list[Job]:
    """What another process takes over (the next start, on SQLite)."""
    if inbox.engines.dialect == "sqlite":
        return await inbox.left_over()
    return await PostgresJobs(inbox)._take_over()
