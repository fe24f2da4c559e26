"""TurnRunner.close: no new work, the work in flight gets its time, then is stopped and its
claims handed back, so that another process (or a Slack retry) answers them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from bot.agent.service import Incoming
from bot.slack.delivery import Keep
from bot.slack.events import Question
from bot.slack.turns import TurnRunner
from bot.store.db import create_engine
from bot.store.events import SlackEvents
from bot.store.history import HistoryStore


class Delivery:
    """Answers after ``delay`` seconds, storing nothing; records what would be posted."""

    def __init__(self, store: HistoryStore, delay: float) -> None:
        self.store = store
        self.delay = delay
        self.events: list[tuple[str, str]] = []
        self.signs: asyncio.Queue[str] = asyncio.Queue()

    async def working(self, question: Question) -> None:
        self.events.append(("working", question.ts))
        self.signs.put_nowait(question.ts)

    async def finished(self, question: Question) -> None:
        self.events.append(("finished", question.ts))

    async def answer(self, question: Question, keep: Keep) -> bool:
        await asyncio.sleep(self.delay)
        self.events.append(("answer", question.ts))
        return True

    async def failed(self, question: Question) -> None:
        self.events.append(("failed", question.ts))


@pytest.fixture
async def claims(database_url: str) -> AsyncIterator[SlackEvents]:
    engine = create_engine(database_url)
    yield SlackEvents(engine)
    await engine.dispose()


async def runner_with(
    claims: SlackEvents, delay: float, *stamps: str
) -> tuple[TurnRunner, Delivery]:
    """A runner answering ``stamps`` in channel C1, once all their working signs are up."""
    replies = Delivery(HistoryStore(claims.engine), delay)
    runner = TurnRunner(replies, None, claims)  # type: ignore[arg-type]
    runner.start()
    for ts in stamps:
        question = Question(Incoming("C1", "hi", "U1", ts), ts)
        assert await claims.claim("C1", ts, question=question.to_dict())
        runner.answer(question)
    async with asyncio.timeout(5):
        for _ in stamps:
            await replies.signs.get()
    return runner, replies


async def test_close_lets_the_work_in_flight_finish(claims: SlackEvents) -> None:
    runner, replies = await runner_with(claims, 0.2, "1.1", "1.2")

    await runner.close(drain_s=10)

    assert [e for e in replies.events if e[0] == "answer"] == [("answer", "1.1"), ("answer", "1.2")]
    assert [await claims.status("C1", ts) for ts in ("1.1", "1.2")] == ["done", "done"]
    assert runner.in_flight == 0 and not runner.accepting


async def test_close_stops_what_does_not_finish_in_time_and_hands_it_back(
    claims: SlackEvents,
) -> None:
    runner, replies = await runner_with(claims, 3600, "1.1", "1.2")  # the second one queued

    started = time.monotonic()
    await runner.close(drain_s=0.3)

    assert time.monotonic() - started < 5
    assert runner.in_flight == 0
    assert not any(kind == "answer" for kind, _ in replies.events)
    assert {ts for kind, ts in replies.events if kind == "finished"} == {"1.1", "1.2"}
    # nothing was answered: both are handed back, and the next process's sweep takes them
    assert [await claims.status("C1", ts) for ts in ("1.1", "1.2")] == ["received", "received"]
    successor = SlackEvents(claims.engine)
    taken = await successor.take_over_abandoned()
    assert sorted(t.question["ts"] for t in taken) == ["1.1", "1.2"]
    assert await successor.take_over_abandoned() == []  # once
