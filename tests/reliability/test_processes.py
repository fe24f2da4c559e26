"""``bot run --http`` as real processes on one PostgreSQL: a load spread over three of them
with duplicate deliveries and a SIGTERM at the end, and processes killed mid-turn.

PostgreSQL only: several processes on one database is what it is for (on SQLite the
channel lock is in-process).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from bot.jobs.inbox import QUEUED
from bot.messages import Message, utcnow
from bot.store.db import create_engine
from bot.store.history import HistoryStore
from bot.store.models import ChannelHoldRow, InboxRow
from bot.turn import TurnState
from tests.conftest import postgres_database
from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, Request
from tests.fakes.slack_server import FakeSlack, event_payload, signed_headers
from tests.reliability.helpers import MANY_PROCESSES, last_user_text, until
from tests.scenarios.slack.conftest import BOT, SECRET, TOKEN, Clock, echo, mention, posts
from tests.scenarios.slack.test_processes import BotProcess, process_settings

# one worker runs every test here (MANY_PROCESSES), so the module's load run is made once
pytestmark = [pytest.mark.postgres, MANY_PROCESSES]

CHANNELS = 30
PER_CHANNEL = 10  # 300 events
#: Slack gives up on a delivery not acknowledged within 3 s
SLACK_ACK_LIMIT_S = 3.0


@pytest.fixture
def settings(postgres_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI) -> dict[str, str]:
    fake_openai.responder = echo
    return process_settings(postgres_url, fake_slack, fake_openai)


async def deliver(
    client: httpx.AsyncClient, bot: BotProcess, body: str, retry_num: int | None = None
) -> float:
    """POST one signed event as Slack does; the seconds until the ack (which must be 200)."""
    headers = signed_headers(
        body, SECRET, retry_num=retry_num, retry_reason="http_timeout" if retry_num else None
    )
    started = time.monotonic()
    response = await client.post(f"{bot.url}/slack/events", content=body, headers=headers)
    assert response.status_code == 200, response.text
    return time.monotonic() - started


@dataclass
class LoadRun:
    """What the load run left: per channel its events' ts in Slack order, the acks' times,
    the answers posted, what the model was sent, what was stored, how the processes ended."""

    stamps: dict[str, list[str]]
    acks: list[float]
    in_flight_at_sigterm: int
    exits: list[tuple[int, str]]
    answers: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    stored: dict[str, tuple[list[Message], list[TurnState]]]


@pytest.fixture(scope="module")
def load_run(_openai_server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> LoadRun:
    """300 mentions over 30 channels, sent round-robin to three ``bot run --http`` processes
    on one PostgreSQL; every fifth one delivered again, at the same moment, to the next
    process (a Slack retry landing elsewhere); each channel's messages sent in Slack order,
    each once the previous one was acked; SIGTERM to all three once every event is acked.
    Run once for the tests below."""
    database = postgres_database()
    url = next(database)
    _openai_server.reset()
    _openai_server.responder = echo
    try:
        with FakeSlack(bot_token=TOKEN, bot_user_id=BOT) as slack:
            run = asyncio.run(_load(url, slack, _openai_server, tmp_path_factory.mktemp("load")))
    finally:
        _openai_server.reset()
        database.close()
    return run


async def _load(url: str, slack: FakeSlack, model: FakeOpenAI, cwd: Path) -> LoadRun:
    settings = {
        "DATABASE_URL": url,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.api_url,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": model.base_url,
        "RATE_LIMIT_PER_USER": "0",  # every mention is U1's: the load is what is tested
        "STREAM_ANSWERS": "off",  # the answers are read as the messages posted
    }
    clock = Clock()
    bots = [BotProcess(cwd, **settings) for _ in range(3)]
    try:
        await asyncio.gather(*(bot.healthy() for bot in bots))
        stamps = {f"C{c:02d}": [clock.ts() for _ in range(PER_CHANNEL)] for c in range(CHANNELS)}

        async with httpx.AsyncClient(timeout=10) as client:

            async def send_channel(index: int, channel: str) -> list[float]:
                acks = []
                for n, ts in enumerate(stamps[channel]):
                    number = index * PER_CHANNEL + n
                    body = event_payload(mention(channel, ts, f"q{n}"), event_id=f"Ev{number}")
                    first = bots[number % 3]
                    if number % 5 == 4:  # the same event, at once, to the next process too
                        again = bots[(number + 1) % 3]
                        acks += await asyncio.gather(
                            deliver(client, first, body), deliver(client, again, body, 1)
                        )
                    else:
                        acks.append(await deliver(client, first, body))
                return acks

            acks = await asyncio.gather(
                *(send_channel(i, channel) for i, channel in enumerate(stamps))
            )
        # stop while turns are still running: they finish, then the processes exit
        in_flight = CHANNELS * PER_CHANNEL - len(posts(slack))
        exits = await asyncio.gather(*(asyncio.to_thread(bot.finish, 60) for bot in bots))
    finally:
        for bot in bots:
            if bot.process.poll() is None:
                bot.process.kill()
                bot.process.communicate()
    engine = create_engine(url)
    try:
        store = HistoryStore(engine)
        stored = {c: (await store.messages(c), await store.turns(c)) for c in stamps}
    finally:
        await engine.dispose()
    return LoadRun(
        stamps=stamps,
        acks=[ack for channel_acks in acks for ack in channel_acks],
        in_flight_at_sigterm=in_flight,
        exits=list(exits),
        answers=posts(slack),
        requests=[r.body for r in model.requests],
        stored=stored,
    )


def test_three_processes_answer_300_events_once_each(load_run: LoadRun) -> None:
    """The load run -> every ack within Slack's 3 s, every event answered exactly once in
    its own thread (the duplicates and their answers included), all three processes exit 0
    after finishing the turns in flight at SIGTERM -> each channel's 10 turns stored once
    each, one at a time (each request saw every earlier turn of its channel, whole), each
    answer right after its question."""
    assert len(load_run.acks) == CHANNELS * PER_CHANNEL * 6 // 5
    assert max(load_run.acks) < SLACK_ACK_LIMIT_S
    assert load_run.in_flight_at_sigterm > 0  # SIGTERM came with work in hand
    for status, stderr in load_run.exits:
        assert status == 0, stderr
        assert "Traceback" not in stderr

    answers = Counter((p["channel"], p["thread_ts"]) for p in load_run.answers)
    expected = {(channel, ts) for channel, stamps in load_run.stamps.items() for ts in stamps}
    assert set(answers) == expected  # none lost
    assert set(answers.values()) == {1}  # none twice

    for channel, stamps in load_run.stamps.items():
        messages, turns = load_run.stored[channel]
        questions = messages[::2]
        assert sorted(m.slack_ts or "" for m in questions) == stamps  # each stored once
        for question, answer in zip(questions, messages[1::2], strict=True):
            assert answer.content == f"You said: {question.content}"
        assert [t.outcome for t in turns] == ["answered"] * PER_CHANNEL
    lengths = sorted(len(body["messages"]) for body in load_run.requests)
    assert lengths == sorted([2 + 2 * n for n in range(PER_CHANNEL)] * CHANNELS)


def test_each_channel_is_answered_in_slack_order_across_processes(load_run: LoadRun) -> None:
    """The load run (each channel's messages sent one after another, each once the one
    before it was acked) -> each channel's turns stored in that order, whichever process
    took each message."""
    out_of_order = {
        channel: [stamps.index(m.slack_ts or "") for m in load_run.stored[channel][0][::2]]
        for channel, stamps in load_run.stamps.items()
    }
    out_of_order = {c: order for c, order in out_of_order.items() if order != sorted(order)}
    assert out_of_order == {}


async def test_a_process_killed_after_the_ack_or_before_posting_loses_nothing(
    tmp_path: Path,
    settings: dict[str, str],
    postgres_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    """Process A acks two mentions and is killed with SIGKILL (a) after the ack, while the
    model is still answering, and (b) after the answer was stored, while the post waits out
    a 429 (Retry-After: 30) -> process B, which was running all along, has each question
    answered once in its thread once A's leases run out (moved past their expiry here
    rather than waited for: LEASE is 30 s) -> (a) answered anew, A's turn marked
    resumed from its journal (the question stored once, the model asked again: no round
    was stored); (b) A's stored answer posted, the model not asked again."""

    def model(request: Request) -> Reply | Hang:
        return Hang(60) if last_user_text(request) == "after the ack" else echo(request)

    fake_openai.responder = model
    fake_slack.rate_limit_next("chat.postMessage", retry_after=30)
    one, two = BotProcess(tmp_path, **settings), BotProcess(tmp_path, **settings)
    try:
        await asyncio.gather(one.healthy(), two.healthy())
        asked = {"CA": clock.ts(), "CS": clock.ts()}
        assert await one.send(mention("CA", asked["CA"], "after the ack")) == 200
        assert await one.send(mention("CS", asked["CS"], "before posting")) == 200
        await until(
            lambda: (
                any(last_user_text(r) == "after the ack" for r in fake_openai.requests)
                and any(c.status == 429 for c in fake_slack.calls_to("chat.postMessage"))
            ),
            "both kill points",
        )
        one.process.send_signal(signal.SIGKILL)
        one.process.communicate(timeout=10)
        fake_openai.responder = echo
        await expire_leases(postgres_url)

        # what Slack shows: A's post that got the 429 is not in the thread
        lost = {"CA": "You said: after the ack", "CS": "You said: before posting"}
        await until(
            lambda: all(fake_slack.messages(channel) for channel in lost),
            "answers in CA and CS from the process still running",
            timeout=10,
        )
        await asyncio.sleep(1)  # and nothing twice
        for channel, answer in lost.items():
            shown = fake_slack.messages(channel)
            assert [(m["text"], m["thread_ts"]) for m in shown] == [(answer, asked[channel])]
        asked_model = Counter(last_user_text(r) for r in fake_openai.requests)
        assert asked_model == {"after the ack": 2, "before posting": 1}
        engine = create_engine(postgres_url)
        try:
            store = HistoryStore(engine)
            assert [t.outcome for t in await store.turns("CA")] == ["answered"]
            assert [m.role for m in await store.messages("CA")] == ["user", "assistant"]
            assert [t.outcome for t in await store.turns("CS")] == ["answered"]
        finally:
            await engine.dispose()
    finally:
        for bot in (one, two):
            if bot.process.poll() is None:
                bot.process.kill()
            bot.process.communicate()


async def expire_leases(database_url: str) -> None:
    """LEASE passes for a dead process: its jobs' and channels' leases run out now."""
    past = utcnow() - timedelta(seconds=1)
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                update(InboxRow).where(InboxRow.status == QUEUED).values(lease_until=past)
            )
            await connection.execute(update(ChannelHoldRow).values(lease_until=past))
    finally:
        await engine.dispose()
