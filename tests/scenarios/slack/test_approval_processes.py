"""A paused turn lives in the database: asked in one ``bot run`` process, its Create is
pressed on another one (PostgreSQL), and the ticket is created once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import (
    answers,
    card_of,
    has_card,
    jira_settings,
    press,
    script_ticket_flow,
)
from tests.scenarios.slack.conftest import Clock, mention
from tests.scenarios.slack.test_processes import BotProcess, process_settings


@pytest.mark.postgres
async def test_a_press_on_another_process_resumes_the_turn_once(
    tmp_path: Path,
    postgres_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    clock: Clock,
) -> None:
    settings = {
        **process_settings(postgres_url, fake_slack, fake_openai),
        **jira_settings(fake_jira),
    }
    script_ticket_flow(fake_openai)
    one, two = BotProcess(tmp_path, **settings), BotProcess(tmp_path, **settings)
    try:
        await asyncio.gather(one.healthy(), two.healthy())
        await one.send(mention("C1", clock.ts(), "find Ana and open a ticket for her"))
        await fake_slack.wait_for(has_card("C1"), timeout=15)
        card = card_of(fake_slack, "C1")
        assert card is not None

        # pressed on the other process, then (a retry, a second press) on the first
        await press(two, "approve_write", card)
        await press(one, "approve_write", card)

        await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Done:")), timeout=15)
        await asyncio.sleep(0.5)  # a second run would have posted by now
        assert fake_jira.created == ["TASK-1"]
        assert len(answers(fake_slack, "C1", "Done:")) == 1
    finally:
        statuses = await asyncio.gather(
            asyncio.to_thread(one.finish), asyncio.to_thread(two.finish)
        )
    assert [s for s, _ in statuses] == [0, 0]
