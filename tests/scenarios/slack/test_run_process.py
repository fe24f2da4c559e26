"""``bot run`` as a real process: what it holds idle and loads only when needed, and its
log lines as a collector reads them."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, echo, mention, posts
from tests.scenarios.slack.test_processes import BotProcess, process_settings, run_once

#: an idle server's resident memory may not pass this (the tokenizer alone is ~145 MB)
IDLE_RSS_LIMIT_MB = 180


def resident_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS line")


async def test_an_idle_server_stays_small_and_loads_the_tokenizer_for_its_first_turn(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.responder = echo
    bot = BotProcess(tmp_path, **process_settings(sqlite_url, fake_slack, fake_openai))
    try:
        await bot.healthy()
        await asyncio.sleep(1)
        idle = resident_mb(bot.process.pid)

        assert await bot.send(mention("C1", clock.ts(), "count me")) == 200
        await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 1, timeout=30)
        busy = resident_mb(bot.process.pid)
    finally:
        status, stderr = await asyncio.to_thread(bot.finish)

    assert status == 0, stderr
    assert idle <= IDLE_RSS_LIMIT_MB, f"idle bot run holds {idle} MB"
    # the first turn counted its messages: the tokenizer came then, not at start
    assert busy - idle > 50
    assert posts(fake_slack, "C1")[0]["text"] == "You said: count me"


def json_lines(stderr: str) -> list[dict[str, object]]:
    """Every line of ``stderr`` as a JSON object (a line that is not one fails the test)."""
    lines = [json.loads(line) for line in stderr.splitlines()]
    for line in lines:
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", str(line["time"]))
        assert {"level", "logger", "message"} <= set(line)
    return lines


async def test_json_logs_are_json_from_start_to_stop(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.responder = echo
    settings = process_settings(sqlite_url, fake_slack, fake_openai)
    bot = BotProcess(tmp_path, **settings, LOG_FORMAT="json", LOG_LEVEL="INFO")
    try:
        await bot.healthy()
        assert await bot.send(mention("C1", clock.ts(), "hi")) == 200
        await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 1, timeout=30)
    finally:
        status, stderr = await asyncio.to_thread(bot.finish)

    assert status == 0, stderr
    lines = json_lines(stderr)
    assert any("Slack connected" in str(line["message"]) for line in lines)


def test_a_fatal_start_up_error_is_one_json_line(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    settings = process_settings(sqlite_url, fake_slack, fake_openai)
    status, stderr = run_once(
        tmp_path, **{**settings, "SLACK_BOT_TOKEN": "xoxb-revoked"}, LOG_FORMAT="json"
    )

    assert status == 3
    (line,) = json_lines(stderr)
    assert line["level"] == "ERROR"
    assert str(line["message"]).startswith("SLACK_BOT_TOKEN was refused by Slack")


def test_missing_settings_are_one_json_line_too(tmp_path: Path, sqlite_url: str) -> None:
    status, stderr = run_once(tmp_path, DATABASE_URL=sqlite_url, LOG_FORMAT="json")

    assert status == 2
    (line,) = json_lines(stderr)
    assert line["level"] == "ERROR" and "SLACK_BOT_TOKEN" in str(line["message"])


async def test_host_is_the_address_it_listens_on(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    settings = process_settings(sqlite_url, fake_slack, fake_openai)
    bot = BotProcess(tmp_path, **settings, HOST="127.0.0.2")
    elsewhere = bot.url
    bot.url = bot.url.replace("127.0.0.1", "127.0.0.2")
    try:
        await bot.healthy()
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"{elsewhere}/healthz")
    finally:
        status, stderr = await asyncio.to_thread(bot.finish)
    assert status == 0, stderr
