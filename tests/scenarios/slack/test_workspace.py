"""The workspace takes the bot's access back: from then on nothing more is posted there, and
it says so once, as an error; a bot started with a token Slack refuses exits with status 3."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, RunningBot, echo, mention, posts
from tests.scenarios.slack.test_processes import process_settings, run_once

REVOKED = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UBOT"]}}
UNINSTALLED = {"type": "app_uninstalled"}


async def answered(bot: RunningBot, slack: FakeSlack, channel: str, ts: str) -> None:
    assert (await bot.send(mention(channel, ts, "hi"))).status_code == 200
    await slack.wait_for(lambda s: len(posts(s, channel)) == 1)
    # and, in the background, the channel's name is asked for after its first answer
    await slack.wait_for(lambda s: bool(s.calls_to("conversations.info")))
    await bot.idle()


@pytest.mark.parametrize("event", [REVOKED, UNINSTALLED], ids=["tokens_revoked", "uninstalled"])
async def test_after_the_workspace_revokes_the_bot_nothing_more_is_posted_there(
    bot: RunningBot,
    fake_slack: FakeSlack,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
    event: dict[str, Any],
) -> None:
    await answered(bot, fake_slack, "C1", clock.ts())
    calls = len(fake_slack.calls)

    with caplog.at_level(logging.WARNING):
        assert (await bot.send(event)).status_code == 200
        # a question in flight at that moment (or one delivered late) posts nothing
        assert (await bot.send(mention("C2", clock.ts(), "still there?"))).status_code == 200
        await bot.idle()

    assert fake_slack.calls[calls:] == []
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "revoked the bot's access" in errors[0].getMessage()
    # and no warning a post for each call it did not send
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


async def test_a_revocation_of_people_s_tokens_only_changes_nothing(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    people_only = {"type": "tokens_revoked", "tokens": {"oauth": ["U7"], "bot": []}}
    assert (await bot.send(people_only)).status_code == 200

    await answered(bot, fake_slack, "C1", clock.ts())


async def test_a_call_answered_token_revoked_stops_the_calls_after_it(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    # another process got the event: this one learns it from Slack's answer
    fake_slack.fail_next("reactions.add", "token_revoked")
    assert (await bot.send(mention("C1", clock.ts(), "hi"))).status_code == 200
    await bot.idle()
    assert (await bot.send(mention("C2", clock.ts(), "hi"))).status_code == 200
    await bot.idle()

    assert [c.method for c in fake_slack.calls if c.method != "auth.test"] == ["reactions.add"]


@pytest.mark.parametrize("error", ["invalid_auth", "account_inactive"])
def test_a_bot_token_slack_refuses_at_start_is_exit_status_3_and_one_line(
    tmp_path: Path,
    sqlite_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    error: str,
) -> None:
    fake_openai.responder = echo
    fake_slack.fail_next("auth.test", error)
    settings = process_settings(sqlite_url, fake_slack, fake_openai)

    status, stderr = run_once(tmp_path, **settings)

    assert status == 3, stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert f"SLACK_BOT_TOKEN was refused by Slack ({error})" in stderr
    assert "exit status 3" in stderr
    # it asked once and gave up: no loop of auth.test calls
    assert len(fake_slack.calls_to("auth.test")) == 1
