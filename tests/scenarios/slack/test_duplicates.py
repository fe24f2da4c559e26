"""Slack behaviour 5: every second delivery of a message is answered once, the claim kept in the
database; a retry whose first attempt died or failed before storing an answer is answered."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import insert

from bot.messages import Message, TurnRecord, utcnow
from bot.store.models import SlackEventRow
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


async def seed_claim(db: Database, channel: str, ts: str, status: str, lease: timedelta) -> None:
    now = utcnow()
    async with db.claims.engine.begin() as connection:
        await connection.execute(
            insert(SlackEventRow).values(
                channel_id=channel,
                message_ts=ts,
                event_id="EvFirst",
                status=status,
                lease_until=now + lease,
                created_at=now,
                updated_at=now,
            )
        )


@pytest.mark.parametrize(
    ("status", "lease", "answered"),
    [
        pytest.param("received", timedelta(seconds=-1), True, id="first-attempt-died"),
        pytest.param("failed", timedelta(0), True, id="first-attempt-failed"),
        pytest.param("received", timedelta(seconds=30), False, id="first-attempt-still-running"),
        pytest.param("done", timedelta(0), False, id="first-attempt-answered"),
        # a sweep posts the stored answer; a retry leaves it
        pytest.param("stored", timedelta(seconds=-1), False, id="first-attempt-stored-one"),
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
    await seed_claim(db, "C1", ts, status, lease)

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
    """The first attempt cannot reach the claims table: 503, so Slack retries; it is answered."""
    event = mention("C1", clock.ts())
    async with db.claims.engine.begin() as connection:
        await connection.run_sync(SlackEventRow.__table__.drop)

    failed = await bot.send(event, event_id="Ev1")

    assert failed.status_code == 503
    assert [c.method for c in fake_slack.calls] == ["auth.test"] and not fake_openai.requests
    assert await db.history.messages("C1") == []
    async with db.claims.engine.begin() as connection:
        await connection.run_sync(SlackEventRow.__table__.create)

    retried = await bot.send(event, event_id="Ev1", retry_num=1)

    assert retried.status_code == 200
    await answered_once(bot, fake_slack, db, "C1")


async def test_a_retry_answers_again_when_the_dead_first_attempt_stored_only_the_question(
    bot: RunningBot,
    fake_slack: FakeSlack,
    db: Database,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first attempt put its working sign up, began its turn (the question is stored)
    and died: the claim says no answer was stored -> the retry answers (the sign already up
    is no fault), and the dead turn is marked interrupted."""
    ts = clock.ts()
    await seed_claim(db, "C1", ts, "received", timedelta(seconds=-1))
    record = TurnRecord(channel_id="C1", user_id="U1", slack_ts=ts, model="m", api_mode="chat")
    await db.history.begin_turn(record, Message.user("hello", user_id="U1", slack_ts=ts))
    dead = AsyncWebClient(token=fake_slack.bot_token, base_url=fake_slack.api_url)
    await dead.reactions_add(channel="C1", timestamp=ts, name="eyes")

    await bot.send(mention("C1", ts), retry_num=1)
    await fake_slack.wait_for(lambda s: bool(posts(s, "C1")))
    await bot.idle()

    assert [c.error for c in fake_slack.calls_to("reactions.add")] == [None, "already_reacted"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "react" in r.message]
    assert [p["text"] for p in posts(fake_slack, "C1")] == ["You said: hello"]
    assert [m.role for m in await db.history.messages("C1")] == ["user", "user", "assistant"]
    assert [t.outcome for t in await db.history.turns("C1")] == ["interrupted", "answered"]
