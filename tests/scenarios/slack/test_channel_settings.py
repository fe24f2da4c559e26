"""Each channel's own settings in the running bot: set with ``bot channels`` (a process of
its own), read by every serving process at the channel's next turn, no restart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import one_line, run_bot
from tests.fakes.openai_server import FakeOpenAI, Reply, Request
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import BOT, Clock, RunningBot, mention, posts


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    return database_url


def said(channel: str, ts: str, text: str, **extra: Any) -> dict[str, Any]:
    """A person's message in a channel, no mention."""
    return {
        "type": "message",
        "channel": channel,
        "channel_type": "channel",
        "user": "U1",
        "text": text,
        "ts": ts,
        **extra,
    }


def channels_cli(database_url: str, tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    return run_bot("channels", *args, env={"DATABASE_URL": database_url}, cwd=tmp_path)


async def test_answer_all_answers_unmentioned_messages_in_that_channel_only(
    start_bot,
    fake_slack: FakeSlack,
    bot_database_url: str,
    clock: Clock,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    # a reply in the bot's thread is answered only as a follow-up: off here
    bot: RunningBot = start_bot(FOLLOW_UPS=False)
    done = channels_cli(bot_database_url, tmp_path, "set", "C1", "answer_all=on")
    assert done.returncode == 0, done.stderr

    top = clock.ts()
    await bot.send(said("C1", top, "is the build green?"))
    await bot.send(said("C2", clock.ts(), "not for the bot"))
    await bot.send(said("C1", clock.ts(), "a reply in a thread", thread_ts=top))
    await bot.send(said("C1", clock.ts(), "another bot", bot_id="B9"))
    await bot.send(said("C1", clock.ts(), "its own", user=BOT))
    both = clock.ts()  # a mention arrives twice: as app_mention and as message
    await bot.send(mention("C1", both, "and this?"))
    await bot.send(said("C1", both, f"<@{BOT}> and this?"))
    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) >= 2)
    await bot.idle()
    await asyncio.sleep(0.2)
    await bot.idle()

    answered = [(p["thread_ts"], p["text"]) for p in posts(fake_slack, "C1")]
    assert answered == [(top, "You said: is the build green?"), (both, "You said: and this?")]
    assert posts(fake_slack, "C2") == []


async def test_two_processes_see_a_cli_change_at_their_next_turn(
    start_bot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    bot_database_url: str,  # type: ignore[no-untyped-def]
    clock: Clock,
    tmp_path: Path,
) -> None:
    systems: list[str] = []

    def record(request: Request) -> Reply:
        systems.append(request.body["messages"][0]["content"])
        return Reply(text="ok")

    one, two = start_bot(), start_bot()
    fake_openai.responder = record
    for process in (one, two):
        await process.send(mention("C1", clock.ts()))
    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 2)
    await one.idle()
    await two.idle()
    done = channels_cli(
        bot_database_url, tmp_path, "set", "C1", "instructions=Answer in Portuguese"
    )
    assert done.returncode == 0, done.stderr

    for answers, process in enumerate((one, two), start=3):
        await process.send(mention("C1", clock.ts()))
        await fake_slack.wait_for(lambda s, n=answers: len(posts(s, "C1")) >= n)
        await process.idle()

    assert ["Answer in Portuguese" in system for system in systems] == [False, False, True, True]


def test_a_bad_value_exits_2_and_changes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    assert channels_cli(sqlite_url, tmp_path, "set", "C1", "answer_all=on").returncode == 0

    refused = channels_cli(sqlite_url, tmp_path, "set", "C1", "tools=clock", "answer_all=maybe")
    shown = channels_cli(sqlite_url, tmp_path, "show", "C1", "--json")

    assert refused.returncode == 2 and "answer_all" in one_line(refused.stderr)
    document = json.loads(shown.stdout)
    assert document["settings"] == {"answer_all": "on"}
    assert [(c["key"], c["value"], c["by"]) for c in document["changes"]] == [
        ("answer_all", "on", "cli")
    ]
