"""Slack behaviour 6 and 10: messages of one channel are handled one after another in Slack
order, nothing lost or interleaved; a message deleted in Slack leaves the stored history,
and one edited there reads as edited."""

from __future__ import annotations

import asyncio
import random

import pytest
from sqlalchemy import select

from bot.store.models import InboxRow
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import (
    Clock,
    Database,
    RunningBot,
    dm,
    mention,
    posts,
    turn_finished,
)


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    return database_url


async def test_five_mentions_at_once_are_answered_in_slack_order(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    fake_openai.latency = 0.1  # turns overlap unless something serialises them
    stamps = [clock.ts() for _ in range(5)]
    events = [mention("C1", ts, f"question {i}") for i, ts in enumerate(stamps)]
    random.Random(7).shuffle(events)

    acks = await asyncio.gather(*(bot.send(event) for event in events))

    assert {a.status_code for a in acks} == {200}
    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 5, timeout=20)
    await bot.idle()
    stored = await db.history.messages("C1")
    assert [(m.role, m.content) for m in stored] == [
        pair
        for i in range(5)
        for pair in (("user", f"question {i}"), ("assistant", f"You said: question {i}"))
    ]
    assert [t.slack_ts for t in await db.history.turns("C1")] == stamps
    # each model request saw every earlier turn of the channel, whole
    seen = [len(r.body["messages"]) for r in fake_openai.requests]
    assert seen == [2, 4, 6, 8, 10]  # system + 2 per earlier turn + the question
    assert [p["thread_ts"] for p in posts(fake_slack, "C1")] == stamps


async def test_dms_in_a_row_are_answered_in_order_at_the_top_level(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    stamps = [clock.ts() for _ in range(3)]

    await asyncio.gather(*(bot.send(dm("D1", ts, f"n{i}")) for i, ts in enumerate(stamps)))

    await fake_slack.wait_for(lambda s: len(s.messages("D1")) == 3, timeout=20)
    assert [m["text"] for m in fake_slack.messages("D1")] == [
        "You said: n0",
        "You said: n1",
        "You said: n2",
    ]


async def test_a_deleted_message_leaves_the_stored_history(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    kept_ts, deleted = clock.ts(), clock.ts()
    for ts, text in ((kept_ts, "keep me"), (deleted, "forget me")):
        await bot.send(mention("C1", ts, text))
        await fake_slack.wait_for(turn_finished("C1", ts))

    response = await bot.send(
        {
            "type": "message",
            "subtype": "message_deleted",
            "hidden": True,
            "channel": "C1",
            "ts": clock.ts(),
            "deleted_ts": deleted,
            "previous_message": {"type": "message", "user": "U1", "text": "forget me"},
        }
    )

    assert response.status_code == 200
    await bot.idle()
    contents = [m.content for m in await db.history.messages("C1")]
    assert "forget me" not in contents and "keep me" in contents
    assert len(contents) == 3
    # nor does the job that answered it once keep a copy (the other one does, for a day)
    copies = select(InboxRow.key, InboxRow.payload)
    async with db.inbox.engines.reads.connect() as connection:
        kept = dict((await connection.execute(copies)).all())
    assert kept[deleted] is None and kept[kept_ts]["text"] == "keep me"


async def test_a_message_deleted_while_its_answer_is_queued_is_not_kept(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    fake_openai.latency = 0.5
    first, second = clock.ts(), clock.ts()
    await bot.send(mention("C1", first, "first"))
    await bot.send(mention("C1", second, "second, soon deleted"))

    await bot.send(
        {
            "type": "message",
            "subtype": "message_deleted",
            "channel": "C1",
            "ts": clock.ts(),
            "deleted_ts": second,
        }
    )

    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 2, timeout=20)
    await bot.idle()
    contents = [m.content for m in await db.history.messages("C1")]
    assert "second, soon deleted" not in contents and "first" in contents


def edited(channel: str, ts: str, before: str, after: str, at: str) -> dict:
    """Slack's ``message_changed`` for U1's message ``ts``."""
    message = {"type": "message", "user": "U1", "text": after, "ts": ts}
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "channel": channel,
        "ts": at,
        "event_ts": at,
        "message": {**message, "edited": {"user": "U1", "ts": at}},
        "previous_message": {**message, "text": before},
    }


async def test_an_edited_message_reads_as_edited_even_while_its_answer_is_under_way(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    fake_openai.latency = 0.5
    asked = clock.ts()
    await bot.send(mention("C1", asked, "what is TASK-1?"))

    response = await bot.send(
        edited("C1", asked, "<@UBOT> what is TASK-1?", "<@UBOT> what is TASK-2?", clock.ts())
    )
    unrelated = await bot.send(edited("C1", clock.ts(), "lunch?", "lunch at 1?", clock.ts()))

    assert response.status_code == 200 and unrelated.status_code == 200
    await fake_slack.wait_for(turn_finished("C1", asked))
    await bot.idle()
    stored = await db.history.messages("C1")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "what is TASK-2?"),
        ("assistant", "You said: what is TASK-1?"),  # answered before the edit came in
    ]
    assert len(posts(fake_slack, "C1")) == 1  # an edit is not a question
