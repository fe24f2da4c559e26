"""What the bot keeps follows what Slack keeps: a deleted channel is forgotten whole, a deleted
question takes what the model made of it out of its waiting turn, and HISTORY_RETENTION_DAYS
deletes older history inside ``bot run``. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from bot.messages import Outcome, utcnow
from bot.store.models import InboxRow, MessageRow, TurnRow
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import (
    TICKET,
    jira_settings,
    posted_card,
    press,
    script_ticket_flow,
)
from tests.scenarios.slack.conftest import Clock, Database, RunningBot, mention, turn_finished


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    return database_url


async def inbox_copies(db: Database, channel: str) -> dict[str, Any]:
    """The inbox's copy of each job of ``channel`` (None: none kept), by key."""
    query = select(InboxRow.key, InboxRow.payload).where(InboxRow.channel_id == channel)
    async with db.inbox.engines.reads.connect() as connection:
        return dict((await connection.execute(query)).all())


async def asked(bot: RunningBot, slack: FakeSlack, channel: str, ts: str, text: str) -> None:
    await bot.send(mention(channel, ts, text))
    await slack.wait_for(turn_finished(channel, ts))


@pytest.mark.parametrize(("kind", "channel"), [("channel_deleted", "C1"), ("group_deleted", "G1")])
async def test_a_channel_deleted_in_slack_is_forgotten_whole(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock, kind: str, channel: str
) -> None:
    for text in ("first", "second"):
        await asked(bot, fake_slack, channel, clock.ts(), text)
    await asked(bot, fake_slack, "C2", clock.ts(), "elsewhere")
    await bot.idle()

    event = {"type": kind, "channel": channel}
    assert (await bot.send(event)).status_code == 200
    await bot.idle()

    assert await db.history.messages(channel) == []
    assert await db.history.turns(channel) == []
    # the inbox keeps the keys (a late retry is still known), no copy of what was said
    copies = await inbox_copies(db, channel)
    # (the deletion's own job holds only the channel's id)
    assert len(copies) == 3 and all(c is None or "text" not in c for c in copies.values())
    assert [m.content for m in await db.history.messages("C2")][:1] == ["elsewhere"]
    assert [s.channel_id for s in await db.history.list_sessions()] == ["C2"]


async def test_a_deleted_question_takes_its_waiting_write_with_it(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    db: Database,
    clock: Clock,
) -> None:
    bot = start_bot(**jira_settings(fake_jira))
    script_ticket_flow(fake_openai)
    question = clock.ts()
    await bot.send(mention("C1", question, "find Ana and open a ticket for her"))
    await fake_slack.wait_for(lambda s: posted_card(s, "C1") is not None)
    card = posted_card(fake_slack, "C1")
    assert card is not None
    await bot.idle()
    (waiting,) = await db.history.turns("C1")
    assert waiting.pending is not None  # the ticket it would create, from the question

    deletion = {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": "C1",
        "ts": clock.ts(),
        "deleted_ts": question,
        "previous_message": {"type": "message", "user": "U1", "text": "find Ana..."},
    }
    assert (await bot.send(deletion)).status_code == 200
    await bot.idle()

    (turn,) = await db.history.turns("C1")
    assert turn.outcome == Outcome.EXPIRED
    assert turn.pending is None and turn.decisions == {}
    kept = json.dumps(turn.waiting())  # the stored state, as the database holds it
    assert TICKET["summary"] not in kept and TICKET["description"] not in kept
    assert "find Ana" not in [m.content for m in await db.history.messages("C1")]
    # the card says so, its buttons and what it showed gone; a late press does nothing
    shown = next(m for m in fake_slack.messages("C1") if m["ts"] == card["ts"])
    assert "The question was deleted" in shown["text"] and not shown.get("blocks")
    assert TICKET["summary"] not in json.dumps(shown)
    await press(bot, "approve_write", card)
    await fake_slack.wait_for(lambda s: bool(s.ephemeral_messages))
    assert fake_jira.created == []


async def test_history_retention_runs_inside_bot_run(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    db: Database,
    clock: Clock,
) -> None:
    first = start_bot()
    await asked(first, fake_slack, "C1", clock.ts(), "long ago")
    await first.idle()
    first.stop()
    # that turn is 40 days old now
    then = utcnow() - timedelta(days=40)
    async with db.inbox.engines.writes.begin() as connection:
        await connection.execute(update(MessageRow).values(created_at=then))
        await connection.execute(update(TurnRow).values(started_at=then))

    bot = start_bot(HISTORY_RETENTION_DAYS=30)
    await asked(bot, fake_slack, "C1", clock.ts(), "today")

    deadline = time.monotonic() + 10
    while "long ago" in [m.content for m in await db.history.messages("C1")]:
        assert time.monotonic() < deadline, "old history not deleted"
        await fake_slack.wait_for(lambda s: True, timeout=0.1)
    contents = [m.content for m in await db.history.messages("C1")]
    assert "today" in contents and "You said: today" in contents
    assert len(await db.history.turns("C1")) == 1
