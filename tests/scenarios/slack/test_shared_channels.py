"""People of another workspace in a shared channel (Slack Connect): they may ask, and are
answered; no write runs for them (whatever WRITE_APPROVAL says), and they cannot approve one."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import (
    TICKET,
    answer_with_ticket,
    answers,
    jira_settings,
    last_tool_result,
    posted_card,
    press,
    script_ticket_flow,
)
from tests.scenarios.slack.conftest import Clock, RunningBot, mention, posts

ASK = "find Ana and open a ticket for her"
#: a guest of the shared channel, as Slack names them in an event
GUEST = {"user": "U9", "user_team": "T2", "source_team": "T2", "team": "T2"}


async def test_a_guest_s_question_is_answered(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    assert (await bot.send(mention("C1", clock.ts(), "hi", **GUEST))).status_code == 200

    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 1)
    assert posts(fake_slack, "C1")[0]["text"] == "You said: hi"


@pytest.mark.parametrize("approval", ["on", "off"])
async def test_a_write_a_guest_asks_for_is_refused_with_a_clear_result(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    clock: Clock,
    approval: str,
) -> None:
    bot = start_bot(**jira_settings(fake_jira, WRITE_APPROVAL=approval))
    script_ticket_flow(fake_openai)

    assert (await bot.send(mention("C1", clock.ts(), ASK, **GUEST))).status_code == 200
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "I did not open a ticket")))
    await bot.idle()

    assert fake_jira.created == []
    assert posted_card(fake_slack, "C1") is None  # nothing for anyone to approve
    # the model read why, and the guest read it in the answer
    assert "another workspace" in last_tool_result(fake_openai.requests[-1])
    (answer,) = answers(fake_slack, "C1", "I did not open a ticket")
    assert "only for people of its own Slack workspace" in answer["text"]


async def test_a_guest_cannot_approve_a_write_even_as_an_admin(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    clock: Clock,
) -> None:
    bot = start_bot(**jira_settings(fake_jira, ADMIN_SLACK_USERS="U9"))
    script_ticket_flow(fake_openai)
    assert (await bot.send(mention("C1", clock.ts(), ASK))).status_code == 200
    await fake_slack.wait_for(lambda s: posted_card(s, "C1") is not None)
    card = posted_card(fake_slack, "C1")
    assert card is not None

    assert await press(bot, "approve_write", card, user="U9", user_team="T2") == 200
    await fake_slack.wait_for(lambda s: bool(s.ephemeral_messages))
    await bot.idle()

    (told,) = fake_slack.ephemeral_messages
    assert told["user"] == "U9" and "own Slack workspace" in told["text"]
    assert fake_jira.created == []
    # the card still waits for someone of the workspace: the requester approves it
    assert await press(bot, "approve_write", card) == 200
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Done:")))
    assert fake_jira.created == ["TASK-1"]


async def test_a_guest_s_turn_goes_on_after_continue_still_without_writes(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    clock: Clock,
) -> None:
    bot = start_bot(**jira_settings(fake_jira, MAX_TOOL_ROUNDS=1))
    fake_openai.script(
        ToolUse("get_current_time", {}),
        "So far: I checked the time.",
        ToolUse("jira_create_issue", TICKET, "w1"),
        answer_with_ticket,
    )
    await bot.send(mention("C1", clock.ts(), "dig deep and open a ticket", **GUEST))
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Shall I keep going?")))
    (offer,) = answers(fake_slack, "C1", "Shall I keep going?")

    assert await press(bot, "continue_turn", offer, user="U9", user_team="T2") == 200
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "I did not open a ticket")))
    await bot.idle()

    assert fake_jira.created == []
    posted = json.dumps([c.args for c in fake_slack.calls_to("chat.postMessage")])
    assert "approve_write" not in posted  # no card for anyone to approve
