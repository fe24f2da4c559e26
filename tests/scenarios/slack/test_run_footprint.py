"""``bot run`` as a real process: what it holds idle, and what it loads only when needed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, echo, mention, posts
from tests.scenarios.slack.test_processes import BotProcess, process_settings

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
