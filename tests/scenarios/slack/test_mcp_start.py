"""``bot run`` with MCP servers over stdio that are slow to start, asked at once after
``/healthz`` answers (as Slack's retries are after a deploy): a slow server's tools are
offered to that first question, and one that hangs costs it the bounded wait only, named
in a warning."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

from bot.tools.mcp.servers import STARTUP_WAIT_S
from tests.fakes.mcp_fake import Recording, stdio_entry, write_config
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.reliability.helpers import tool_result
from tests.scenarios.slack.agent_helpers import answers
from tests.scenarios.slack.conftest import Clock, echo, mention
from tests.scenarios.slack.test_processes import BotProcess, process_settings

#: seconds a Python process may take to do its part on a busy machine
SLACK_S = 5.0


def start_bot(tmp_path: Path, settings: dict[str, str], servers: dict) -> BotProcess:  # type: ignore[type-arg]
    config = write_config(tmp_path, servers)
    return BotProcess(tmp_path, **settings, MCP_CONFIG=str(config), LOG_LEVEL="INFO")


def lines_with(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


async def answered(fake_slack: FakeSlack, text: str) -> float:
    """When an answer holding ``text`` was in the thread (time.monotonic)."""
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", text)), timeout=60)
    return time.monotonic()


async def test_a_server_slow_to_start_serves_the_first_question(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    recording = Recording(tmp_path / "calls.jsonl")
    fake_openai.script(
        ToolUse("slow__lookup", {"key": "T-1"}, "r1"),
        lambda request: Reply(text=f"T-1 is {tool_result(request, 'r1')['status']}."),
    )
    settings = process_settings(sqlite_url, fake_slack, fake_openai)
    bot = start_bot(tmp_path, settings, {"slow": stdio_entry(recording, delay_s=2)})
    try:
        await bot.healthy()
        await asyncio.sleep(0.1)
        assert await bot.send(mention("C1", clock.ts(), "look T-1 up")) == 200
        await answered(fake_slack, "T-1 is open.")
    finally:
        status, stderr = await asyncio.to_thread(bot.finish)

    assert status == 0, stderr
    assert "slow__lookup" in fake_openai.requests[0].tool_names
    assert recording.tools() == ["lookup"]
    connected = lines_with(stderr, "MCP server slow (stdio) connected: ")
    assert len(connected) == 1 and connected[0].endswith(" tools offered"), stderr
    assert not lines_with(stderr, "still connecting"), stderr


async def test_a_server_that_hangs_costs_the_first_question_the_bounded_wait_once(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    recording = Recording(tmp_path / "calls.jsonl")
    servers = {"stuck": stdio_entry(recording, delay_s=math.inf), "fake": stdio_entry(recording)}
    fake_openai.responder = echo
    bot = start_bot(tmp_path, process_settings(sqlite_url, fake_slack, fake_openai), servers)
    try:
        await bot.healthy()
        await asyncio.sleep(0.1)
        asked = time.monotonic()
        assert await bot.send(mention("C1", clock.ts(), "first")) == 200
        first = await answered(fake_slack, "You said: first") - asked
        asked = time.monotonic()
        assert await bot.send(mention("C1", clock.ts(), "second")) == 200
        second = await answered(fake_slack, "You said: second") - asked
    finally:
        status, stderr = await asyncio.to_thread(bot.finish)

    assert status == 0, stderr
    assert first < STARTUP_WAIT_S + SLACK_S, stderr
    # the second does not wait again for the server that spent its wait already
    assert second < STARTUP_WAIT_S / 2, stderr
    offered = fake_openai.requests[0].tool_names
    assert "fake__lookup" in offered and not [n for n in offered if n.startswith("stuck")]
    went_on = lines_with(stderr, "MCP server stuck (stdio) is still connecting after 10 s")
    assert len(went_on) == 1 and "WARNING" in went_on[0], stderr
    assert "the turn went on without its tools" in went_on[0]
    assert len(lines_with(stderr, "MCP server fake (stdio) connected: ")) == 1, stderr
    assert "Traceback" not in stderr
