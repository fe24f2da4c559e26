"""SQLite under concurrent writers: several processes and in-process turns on one file.

SQLite serves one process per channel (the channel lock is in-process there), but
several processes on different channels share the file: WAL, busy_timeout and BEGIN
IMMEDIATE must make them wait for each other, never fail with "database is locked".
"""

from __future__ import annotations

import asyncio
import re

from bot.agent.conversations import Incoming
from bot.agent.conversations import Reply as Answer
from bot.config import load_settings
from bot.wiring import Services, build_services
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.reliability.helpers import (
    MANY_PROCESSES,
    assert_paired,
    bot_env,
    finish,
    last_user_text,
    popen_bot,
    read_session,
    until,
)

pytestmark = MANY_PROCESSES

PROCESSES = ("P1", "P2", "P3")
TURNS_PER_PROCESS = 4
IN_PROCESS = {"I1": 4, "I2": 4}  # channel -> turns, all started at once


def model(request: Request) -> Reply | ToolUse:
    """Each turn: one tool round (more writes), then an answer naming the question."""
    items = request.body["messages"]
    if items[-1]["role"] == "tool":
        return Reply(text="ok: " + last_user_text(request))
    return ToolUse("get_current_time", {})


async def ask(services: Services, incoming: Incoming) -> Answer:
    """One turn as the shells run it: with its channel held (bot.jobs)."""
    async with services.jobs.hold(incoming.channel_id):
        return await services.conversations.ask(incoming)


async def test_processes_and_in_process_turns_share_one_file(
    sqlite_url: str, fake_openai: FakeOpenAI, tmp_path, caplog
) -> None:
    """3 ``bot chat`` processes (4 turns each, one channel each) and 8 in-process turns on
    2 more channels, all on one SQLite file at once, each turn with a tool round: 20 turns
    -> every one answered, "database is locked" nowhere (outputs, logs) -> every turn is
    stored: 4 messages each, outcome ``answered``, in order."""
    fake_openai.responder = model
    fake_openai.latency = 0.05  # turns overlap instead of running back to back
    env = bot_env(fake_openai, sqlite_url)
    lines = "".join(f"q{n}\n" for n in range(TURNS_PER_PROCESS)) + "exit\n"
    processes = [
        popen_bot("chat", "--channel", channel, env=env, cwd=tmp_path, stdin=True)
        for channel in PROCESSES
    ]
    settings = load_settings(
        DATABASE_URL=sqlite_url, OPENAI_API_KEY="test-key", OPENAI_BASE_URL=fake_openai.base_url
    )
    services = build_services(settings)
    try:
        # the processes' turns begin once they have started up: meet them there
        async with asyncio.timeout(30):
            writing = asyncio.gather(
                *(asyncio.to_thread(finish, process, 25, lines) for process in processes)
            )
            await until(
                lambda: len(fake_openai.requests) >= len(PROCESSES), "the processes' first turns"
            )
            replies = await asyncio.gather(
                *(
                    ask(services, Incoming(channel, f"q{n}"))
                    for channel, turns in IN_PROCESS.items()
                    for n in range(turns)
                )
            )
            outputs = await writing
        in_process = {
            channel: await read_session(sqlite_url, channel)
            for channel in (*PROCESSES, *IN_PROCESS)
        }
    finally:
        await services.close()
        for process in processes:
            if process.poll() is None:
                process.kill()

    assert all(reply.ok for reply in replies), [r.text for r in replies if not r.ok]
    for status, out, err in outputs:
        assert status == 0, err
        assert "locked" not in out + err
        # each answer follows the prompt for the next line, "you> "
        assert re.findall(r"bot[^>]*> (.*)", out) == [f"ok: q{n}" for n in range(TURNS_PER_PROCESS)]
    assert not [r for r in caplog.records if "locked" in r.getMessage()]
    turns_total = 0
    for channel, (messages, turns) in in_process.items():
        expected = TURNS_PER_PROCESS if channel in PROCESSES else IN_PROCESS[channel]
        assert [t.outcome for t in turns] == ["answered"] * expected
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"] * expected
        assert_paired(messages)
        assert sorted(m.content for m in messages if m.role == "user") == [
            f"q{n}" for n in range(expected)
        ]
        turns_total += len(turns)
    assert turns_total == 20
