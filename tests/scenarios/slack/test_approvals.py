"""Writing tools wait for the requester in Slack: a card with Create and Cancel, pressed over
real HTTP (signed block_actions), run once, refused to strangers, expired on time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from bot.agent.loop import NOT_IN_CHANNEL
from bot.channels import BY_ADMIN
from bot.store.channels import ChannelSettingsStore
from bot.store.db import create_engines
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import (
    TICKET,
    answers,
    jira_settings,
    posted_card,
    press,
    script_ticket_flow,
)
from tests.scenarios.slack.conftest import Clock, Database, RunningBot, mention

ASK = "find Ana and open a ticket for her"


async def ask_for_ticket(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    clock: Clock,
    **settings: object,
) -> tuple[RunningBot, dict]:  # type: ignore[type-arg]
    bot = start_bot(**jira_settings(fake_jira, **settings))
    script_ticket_flow(fake_openai)
    assert (await bot.send(mention("C1", clock.ts(), ASK))).status_code == 200
    # as posted: a short APPROVAL_TIMEOUT_S may expire it before a slow machine looks
    await fake_slack.wait_for(lambda s: posted_card(s, "C1") is not None)
    card = posted_card(fake_slack, "C1")
    assert card is not None
    return bot, card


async def test_the_card_shows_the_write_and_create_runs_it_once(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, fake_jira: FakeJira, clock: Clock
) -> None:
    bot, card = await ask_for_ticket(start_bot, fake_slack, fake_openai, fake_jira, clock)

    shown = json.dumps(card["blocks"])
    for expected in ("TASK", "Task", TICKET["summary"], TICKET["description"], "<@U1>"):
        assert expected in shown
    assert fake_jira.created == []
    # the steps were shown while they ran, then cleaned up (once the card is up)
    live = [c for c in fake_slack.calls_to("chat.postMessage") if "contacts" in c.args["text"]]
    assert live and "Searching contacts for 'Ana'" in live[0].args["text"]
    await fake_slack.wait_for(lambda s: not answers(s, "C1", "Searching contacts"))

    # a stranger cannot press it
    assert await press(bot, "approve_write", card, user="U2") == 200
    await fake_slack.wait_for(lambda s: bool(s.ephemeral_messages))
    (told,) = fake_slack.ephemeral_messages
    assert told["user"] == "U2" and "Only the person who asked" in told["text"]
    assert fake_jira.created == []

    # pressed twice at once: one ticket; the presses take their turns in the channel, so
    # the second one finds the request answered, and says so
    await asyncio.gather(*(press(bot, "approve_write", card) for _ in range(2)))
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Done:")))
    await bot.idle()
    assert fake_jira.created == ["TASK-1"]
    assert "already been answered" in fake_slack.ephemeral_messages[-1]["text"]
    (answer,) = answers(fake_slack, "C1", "Done:")
    assert f"<{fake_jira.url}/browse/TASK-1|TASK-1>" in answer["text"]
    assert answer["thread_ts"] == card["thread_ts"]
    settled = next(m for m in fake_slack.messages("C1") if m["ts"] == card["ts"])
    assert "Approved by <@U1>" in json.dumps(settled["blocks"])
    assert not any(b["type"] == "actions" for b in settled["blocks"])

    # a late press does nothing more
    await press(bot, "approve_write", card)
    await fake_slack.wait_for(lambda s: len(s.ephemeral_messages) == 3)
    assert "already been answered" in fake_slack.ephemeral_messages[-1]["text"]
    assert fake_jira.created == ["TASK-1"]


async def test_cancel_tells_the_model_and_an_admin_may_press(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, fake_jira: FakeJira, clock: Clock
) -> None:
    bot, card = await ask_for_ticket(
        start_bot, fake_slack, fake_openai, fake_jira, clock, ADMIN_SLACK_USERS="UADMIN"
    )

    await press(bot, "decline_write", card, user="UADMIN")

    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "I did not open a ticket")))
    assert fake_jira.created == []
    assert "cancelled this action" in json.dumps(fake_openai.requests[-1].body)
    settled = next(m for m in fake_slack.messages("C1") if m["ts"] == card["ts"])
    assert "Cancelled by <@UADMIN>" in json.dumps(settled["blocks"])


async def test_a_tool_taken_from_the_channel_while_its_card_waits_is_refused_at_the_press(
    start_bot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    clock: Clock,
    db: Database,
    bot_database_url: str,
) -> None:
    """The card is up; an admin sets the channel's tools to leave the write out; the asker
    presses Create -> nothing is created, the thread reads a plain refusal, the stored turn
    holds it as the call's result."""
    bot, card = await ask_for_ticket(start_bot, fake_slack, fake_openai, fake_jira, clock)
    engines = create_engines(bot_database_url)
    try:
        await ChannelSettingsStore(engines).change("C1", {"tools": "crm_*"}, BY_ADMIN)
    finally:
        await engines.dispose()

    assert await press(bot, "approve_write", card) == 200

    refusal = NOT_IN_CHANNEL.format("jira_create_issue")
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "I did not open a ticket")))
    await bot.idle()
    (answer,) = answers(fake_slack, "C1", "I did not open a ticket")
    assert "not available in this channel" in answer["text"]
    assert answer["thread_ts"] == card["thread_ts"]
    assert fake_jira.created == [] and not fake_jira.calls("POST", "/issue$")
    stored = await db.history.messages("C1")
    (result,) = [m for m in stored if m.role == "tool" and m.name == "jira_create_issue"]
    assert json.loads(result.content or "{}") == {"error": refusal}
    (turn,) = await db.history.turns("C1")
    assert turn.outcome == "answered" and turn.tools_called[-1] == "jira_create_issue"


async def test_an_unanswered_request_expires_and_a_late_press_does_nothing(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, fake_jira: FakeJira, clock: Clock
) -> None:
    bot, card = await ask_for_ticket(
        start_bot, fake_slack, fake_openai, fake_jira, clock, APPROVAL_TIMEOUT_S=0.5
    )

    def expired(slack: FakeSlack) -> bool:
        message = next(m for m in slack.messages("C1") if m["ts"] == card["ts"])
        return "expired" in json.dumps(message["blocks"])

    await fake_slack.wait_for(expired, timeout=5)
    await press(bot, "approve_write", card)
    await fake_slack.wait_for(lambda s: bool(s.ephemeral_messages))
    assert "expired" in fake_slack.ephemeral_messages[0]["text"]
    assert fake_jira.created == []


async def test_a_press_naming_another_message_edits_only_the_turn_s_own_card(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, fake_jira: FakeJira, clock: Clock
) -> None:
    """The requester's own Cancel, its container.message_ts (and message.ts) forged to name
    the bot's answer to someone else -> the turn is cancelled and its card says so; the
    other answer is not touched."""
    bot = start_bot(**jira_settings(fake_jira))
    fake_openai.script(Reply(text="An answer to someone else."))
    await bot.send(mention("C1", clock.ts(), "something else", user="U9"))
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "someone else")))
    (other,) = answers(fake_slack, "C1", "someone else")
    script_ticket_flow(fake_openai)
    await bot.send(mention("C1", clock.ts(), ASK))
    await fake_slack.wait_for(lambda s: posted_card(s, "C1") is not None)
    card = posted_card(fake_slack, "C1")
    assert card is not None

    forged = {**card, "ts": other["ts"]}  # the card's button, the other message's ts
    assert await press(bot, "decline_write", forged) == 200

    await fake_slack.wait_for(lambda s: not fake_openai.pending)
    await bot.idle()
    assert fake_jira.created == []
    kept = next(m for m in fake_slack.messages("C1") if m["ts"] == other["ts"])
    # untouched: its text, and its blocks (the answer and its feedback buttons)
    assert kept["text"] == "An answer to someone else." and kept["blocks"] == other["blocks"]
    assert not any(c.args.get("ts") == other["ts"] for c in fake_slack.calls_to("chat.update"))
    settled = next(m for m in fake_slack.messages("C1") if m["ts"] == card["ts"])
    assert "Cancelled by <@U1>" in json.dumps(settled["blocks"])
