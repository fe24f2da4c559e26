"""Slack behaviour 5: every second delivery of a message is answered once, the claim kept in the
database; a retry whose first attempt died or failed before storing an answer is answered."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import insert

from bot.messages import Message, Outcome, utcnow
from bot.store.models import InboxRow
from bot.store.turns import TurnStore
from bot.turn import TurnState
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, Database, RunningBot, mention, posts


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    return database_url


async def answered_once(bot: RunningBot, slack: FakeSlack, db: Database, channel: str) -> None:
    await slack.wait_for(lambda s: bool(posts(s, channel)))
    await bot.idle()
    assert len(posts(slack, channel)) == 1
    assert len(slack.calls_to("reactions.add")) == 1
    assert [m.role for m in await db.history.messages(channel)] == ["user", "assistant"]
    assert len(await db.history.turns(channel)) == 1


async def test_a_slack_retry_is_answered_once(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    event = mention("C1", clock.ts())

    first = await bot.send(event, event_id="Ev1")
    retry_in_flight = await bot.send(event, event_id="Ev1", retry_num=1)
    await answered_once(bot, fake_slack, db, "C1")
    late_retry = await bot.send(event, event_id="Ev1", retry_num=2)

    assert [r.status_code for r in (first, retry_in_flight, late_retry)] == [200, 200, 200]
    await bot.idle()
    assert len(posts(fake_slack)) == 1


async def test_deliveries_racing_each_other_are_answered_once(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    event = mention("C1", clock.ts())

    responses = await asyncio.gather(*(bot.send(event, event_id="Ev1") for _ in range(4)))

    assert {r.status_code for r in responses} == {200}
    await answered_once(bot, fake_slack, db, "C1")


async def test_an_app_mention_and_a_message_for_one_message_are_answered_once(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    ts = clock.ts()
    as_mention = mention("C1", ts, "hi")
    as_message = {**as_mention, "type": "message", "channel_type": "channel"}

    await asyncio.gather(
        bot.send(as_mention, event_id="EvMention"), bot.send(as_message, event_id="EvMessage")
    )

    await answered_once(bot, fake_slack, db, "C1")


async def seed_job(
    db: Database, channel: str, ts: str, status: str, lease: timedelta, text: str = "hello"
) -> None:
    """The first attempt's job, as another process left it in the inbox."""
    now = utcnow()
    question = {"channel": channel, "ts": ts, "text": text, "user": "U1"}
    async with db.inbox.engines.writes.begin() as connection:
        await connection.execute(
            insert(InboxRow).values(
                channel_id=channel,
                key=ts,
                kind="question",
                event_id="EvFirst",
                payload={**question, "thread_ts": ts, "pane": False},
                status=status,
                holder="another process",
                lease_until=now + lease,
                created_at=now,
                updated_at=now,
            )
        )


@pytest.mark.parametrize(
    ("status", "lease", "answered"),
    [
        pytest.param("queued", timedelta(seconds=-1), True, id="first-attempt-died"),
        pytest.param("failed", timedelta(0), True, id="first-attempt-failed"),
        pytest.param("queued", timedelta(seconds=30), False, id="first-attempt-still-running"),
        pytest.param("done", timedelta(0), False, id="first-attempt-answered"),
    ],
)
async def test_a_retry_is_answered_only_when_the_first_attempt_stored_no_answer(
    bot: RunningBot,
    fake_slack: FakeSlack,
    db: Database,
    clock: Clock,
    status: str,
    lease: timedelta,
    answered: bool,
) -> None:
    ts, later = clock.ts(), clock.ts()
    await seed_job(db, "C1", ts, status, lease)

    response = await bot.send(mention("C1", ts), event_id="EvFirst", retry_num=1)
    # a later message in another channel: once it is answered, the retry has been dealt with
    await bot.send(mention("C2", later))
    await fake_slack.wait_for(lambda s: bool(posts(s, "C2")))
    await bot.idle()

    assert response.status_code == 200
    assert len(posts(fake_slack, "C1")) == (1 if answered else 0)
    assert len(await db.history.messages("C1")) == (2 if answered else 0)


async def test_a_retry_after_a_503_before_anything_was_stored_is_answered(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    """The first attempt cannot reach the inbox: 503, so Slack retries; it is answered."""
    event = mention("C1", clock.ts())
    async with db.inbox.engines.writes.begin() as connection:
        await connection.run_sync(InboxRow.__table__.drop)

    failed = await bot.send(event, event_id="Ev1")

    assert failed.status_code == 503
    assert [c.method for c in fake_slack.calls] == ["auth.test"] and not fake_openai.requests
    assert await db.history.messages("C1") == []
    async with db.inbox.engines.writes.begin() as connection:
        await connection.run_sync(InboxRow.__table__.create)

    retried = await bot.send(event, event_id="Ev1", retry_num=1)

    assert retried.status_code == 200
    await answered_once(bot, fake_slack, db, "C1")


async def test_a_retry_goes_on_with_the_turn_the_dead_first_attempt_began(
    bot: RunningBot,
    fake_slack: FakeSlack,
    db: Database,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first attempt put its working sign up, began its turn (the question is stored)
    and died -> the retry takes the job over and goes on with that turn (the sign already up
    is no fault): the question is stored once, and the one turn is answered."""
    ts = clock.ts()
    await seed_job(db, "C1", ts, "queued", timedelta(seconds=-1))
    user = Message.user("hello", user_id="U1", slack_ts=ts)
    record = TurnState(
        channel_id="C1", user_id="U1", slack_ts=ts, model="m", api_mode="chat", messages=[user]
    )
    await TurnStore(db.history.engines).begin(record, 12_000)
    dead = AsyncWebClient(token=fake_slack.bot_token, base_url=fake_slack.api_url)
    await dead.reactions_add(channel="C1", timestamp=ts, name="eyes")

    await bot.send(mention("C1", ts), retry_num=1)
    await fake_slack.wait_for(lambda s: bool(posts(s, "C1")))
    await bot.idle()

    assert [c.error for c in fake_slack.calls_to("reactions.add")] == [None, "already_reacted"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "react" in r.message]
    assert [p["text"] for p in posts(fake_slack, "C1")] == ["You said: hello"]
    assert [m.role for m in await db.history.messages("C1")] == ["user", "assistant"]
    assert [t.outcome for t in await db.history.turns("C1")] == ["answered"]


async def test_a_retry_posts_the_answer_the_dead_first_attempt_stored_without_asking_again(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    """The first attempt stored its whole turn and died before posting -> the retry posts
    that answer; the model is not asked again."""
    ts = clock.ts()
    await seed_job(db, "C1", ts, "queued", timedelta(seconds=-1))
    turns = TurnStore(db.history.engines)
    user = Message.user("hello", user_id="U1", slack_ts=ts)
    record = TurnState(
        channel_id="C1", user_id="U1", slack_ts=ts, model="m", api_mode="chat", messages=[user]
    )
    await turns.begin(record, 12_000)
    record.outcome = Outcome.ANSWERED
    record.messages.append(Message.assistant("stored before the crash"))
    await turns.finish(record)

    await bot.send(mention("C1", ts), retry_num=1)
    await fake_slack.wait_for(lambda s: bool(posts(s, "C1")))
    await bot.idle()

    assert [p["text"] for p in posts(fake_slack, "C1")] == ["stored before the crash"]
    assert fake_openai.requests == []
    assert [t.outcome for t in await db.history.turns("C1")] == ["answered"]
