"""Signed requests the bot does not handle (HTTP mode, over real HTTP, on each database): a
body that is no JSON object, an event_callback without an event, fields of the wrong type,
an event or a button it did not subscribe to. Each is acknowledged with 200 (a 500 or a 404
would make Slack send it three times more) and at most one warning line; nothing is
answered or stored."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import (
    FakeSlack,
    block_actions_payload,
    event_payload,
    signed_headers,
)
from tests.scenarios.slack.conftest import BOT, SECRET, Clock, Database, RunningBot, dm, mention


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    return database_url


Deliver = Callable[[str], Awaitable[None]]


@pytest.fixture
def deliver(
    bot: RunningBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    db: Database,
    caplog: pytest.LogCaptureFixture,
) -> Deliver:
    """``await deliver(body)``: post it signed, and check it was acknowledged (200) with at
    most one warning line, nothing answered, asked or stored."""

    async def post_and_check(body: str) -> None:
        with caplog.at_level(logging.INFO):
            response = await bot.post(body, signed_headers(body, SECRET))
        assert response.status_code == 200, response.text
        await bot.idle()
        warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) <= 1, [r.getMessage() for r in warned]
        assert all(r.exc_info is None and "\n" not in r.getMessage() for r in warned)
        assert [c.method for c in fake_slack.calls] == ["auth.test"]
        assert fake_openai.requests == []
        assert await db.history.list_sessions() == []
        assert await db.inbox.left_over() == []

    return post_and_check


@pytest.mark.parametrize("body", ["{bad", "[1, 2]", '"text"', "payload=%7Bbad", "payload=%5B%5D"])
async def test_a_signed_body_that_is_no_object_is_acknowledged(
    deliver: Deliver,
    body: str,
) -> None:
    await deliver(body)


def envelope(**fields: Any) -> str:
    """An event_callback with ``fields`` replacing its own."""
    return json.dumps({**json.loads(event_payload(mention("C1", "1700000000.000100"))), **fields})


ENVELOPES = {
    "no event": lambda: json.dumps({"type": "event_callback", "team_id": "T1"}),
    "event null": lambda: envelope(event=None),
    "event a list": lambda: envelope(event=[]),
    "event_id an object": lambda: envelope(event_id={"id": 1}),
}


@pytest.mark.parametrize("case", ENVELOPES)
async def test_a_broken_envelope_is_acknowledged(
    deliver: Deliver,
    case: str,
) -> None:
    await deliver(ENVELOPES[case]())


ODD_MENTIONS: dict[str, dict[str, Any]] = {
    "text null": {"text": None},
    "text a list": {"text": [f"<@{BOT}>", "hello"]},
    "text a number": {"text": 42},
    "ts an object": {"ts": {"$gt": ""}},
    "ts a number": {"ts": 1700000000.0001},
    "ts not a Slack ts": {"ts": "'; DROP TABLE turns; --"},
    "channel a number": {"channel": 12345},
    "channel an object": {"channel": {"id": "C1"}},
    "channel 200 characters": {"channel": "C" * 200},
    "user an object": {"user": {"id": "U1", "name": "ana"}},
    "user a list": {"user": ["U1"]},
    "thread_ts an object": {"thread_ts": {"ts": "1"}},
    "subtype a list": {"subtype": ["file_share"]},
    "type a number": {"type": 7},
}


@pytest.mark.parametrize("case", ODD_MENTIONS)
@pytest.mark.parametrize("where", ["mention", "DM"])
async def test_a_mention_or_dm_with_a_field_of_the_wrong_type_is_acknowledged(
    deliver: Deliver,
    clock: Clock,
    case: str,
    where: str,
) -> None:
    made = mention if where == "mention" else dm
    event = {**made("C1", clock.ts(), f"<@{BOT}> hello"), **ODD_MENTIONS[case]}
    await deliver(event_payload(event))


ODD_CHANGES: dict[str, dict[str, Any]] = {
    "an edit whose message is a string": {"subtype": "message_changed", "message": "hi"},
    "an edit whose ts is an object": {
        "subtype": "message_changed",
        "message": {"user": "U1", "text": "new", "ts": {"a": 1}},
    },
    "an edit whose user is an object": {
        "subtype": "message_changed",
        "message": {"user": {"id": "U1"}, "text": "new", "ts": "1700000000.000100"},
    },
    "a deletion whose deleted_ts is a list": {"subtype": "message_deleted", "deleted_ts": []},
}


@pytest.mark.parametrize("case", ODD_CHANGES)
async def test_an_odd_edit_or_deletion_is_acknowledged(
    deliver: Deliver,
    clock: Clock,
    case: str,
) -> None:
    event = {**dm("D1", clock.ts()), **ODD_CHANGES[case]}
    await deliver(event_payload(event))


UNSUBSCRIBED = {
    "reaction_added": {
        "type": "reaction_added",
        "user": "U1",
        "reaction": "eyes",
        "item": {"type": "message", "channel": "C1", "ts": "1700000000.000100"},
    },
    "team_join (its user is an object)": {"type": "team_join", "user": {"id": "U9"}},
    "member_joined_channel": {"type": "member_joined_channel", "user": "U1", "channel": "C1"},
}


@pytest.mark.parametrize("case", UNSUBSCRIBED)
async def test_an_event_the_bot_did_not_subscribe_to_is_acknowledged(
    deliver: Deliver,
    case: str,
) -> None:
    await deliver(event_payload(UNSUBSCRIBED[case]))


async def test_a_button_that_is_not_the_bots_is_acknowledged(
    deliver: Deliver,
) -> None:
    body = block_actions_payload("someone_elses_button", "1")
    await deliver(body)


async def test_after_the_odd_events_a_real_question_is_answered(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    for case in ODD_MENTIONS.values():
        await bot.send({**dm("D1", clock.ts()), **case})
    ts = clock.ts()
    await bot.send(dm("D1", ts, "still there?"))
    await fake_slack.wait_for(
        lambda s: any(
            c.args.get("channel") == "D1"
            for method in ("chat.postMessage", "chat.startStream")
            for c in s.calls_to(method)
        )
    )
