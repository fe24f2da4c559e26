"""``bot run`` as real processes: start-up errors are one line, SIGTERM drains the turns in
flight and exits 0, and two processes on one PostgreSQL share duplicates and the channel lock."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bot.store.db import create_engine
from bot.store.history import HistoryStore
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack, event_payload, signed_headers
from tests.scenarios.slack.conftest import SECRET, TOKEN, Clock, echo, mention, posts


class BotProcess:
    """``python -m bot run --http --port N`` with the given settings."""

    def __init__(self, cwd: Path, **settings: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_"))}
        env.update({"LOG_LEVEL": "WARNING", **settings})
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--http", "--port", str(self.port)],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    async def healthy(self, timeout: float = 60) -> None:  # noqa: ASYNC109 - polling deadline
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                assert self.process.poll() is None, self.process.communicate()[1]
                try:
                    if (await client.get(f"{self.url}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise AssertionError("the bot did not become healthy")

    async def send(self, event: dict, event_id: str | None = None) -> int:  # type: ignore[type-arg]
        body = event_payload(event, event_id=event_id)
        return await self.post(body, signed_headers(body, SECRET))

    async def post(self, body: str, headers: dict[str, str]) -> int:
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{self.url}/slack/events", content=body, headers=headers)
        return response.status_code

    def finish(self, timeout: float = 40) -> tuple[int, str]:
        """SIGTERM, then the exit status and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=timeout)
        return self.process.returncode, stderr


def run_once(cwd: Path, **settings: str) -> tuple[int, str]:
    """A ``bot run`` expected to stop by itself: its exit status and stderr."""
    bot = BotProcess(cwd, **settings)
    _, stderr = bot.process.communicate(timeout=60)
    return bot.process.returncode, stderr


def process_settings(
    database_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> dict[str, str]:
    """What a ``bot run`` process needs to talk to the fakes and ``database_url``."""
    return {
        "DATABASE_URL": database_url,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": fake_slack.api_url,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "STREAM_ANSWERS": "off",  # these read posted answers (streams: test_streaming)
    }


@pytest.fixture
def settings(sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI) -> dict[str, str]:
    fake_openai.responder = echo
    return process_settings(sqlite_url, fake_slack, fake_openai)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"SLACK_SIGNING_SECRET": ""}, "SLACK_SIGNING_SECRET"),
        ({"SLACK_BOT_TOKEN": ""}, "SLACK_BOT_TOKEN"),
    ],
    ids=["empty signing secret", "no bot token"],
)
def test_a_bad_setting_stops_start_up_with_one_line(
    tmp_path: Path, settings: dict[str, str], change: dict[str, str], named: str
) -> None:
    status, stderr = run_once(tmp_path, **{**settings, **change})

    assert status == 2
    assert stderr.count("\n") == 1 and named in stderr and "Traceback" not in stderr


async def test_sigterm_lets_the_turn_in_flight_finish_and_exits_0(
    tmp_path: Path,
    settings: dict[str, str],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    fake_openai.latency = 2.0
    bot = BotProcess(tmp_path, **settings, LOG_LEVEL="INFO")
    await bot.healthy()
    ts = clock.ts()

    assert await bot.send(mention("C1", ts)) == 200
    await fake_slack.wait_for(lambda s: bool(s.calls_to("reactions.add")))
    forged = event_payload(mention("C1", clock.ts(), "a private question"))
    assert await bot.post(forged, signed_headers(forged, "not-the-secret")) == 401
    status, stderr = await asyncio.to_thread(bot.finish)

    assert status == 0, stderr
    assert [p["thread_ts"] for p in posts(fake_slack)] == [ts]
    assert "Traceback" not in stderr
    # Bolt logs a refused request's body at INFO: the log keeps Bolt at WARNING
    assert "a private question" not in stderr


@pytest.fixture
async def two_bots(tmp_path: Path, postgres_url: str, settings: dict[str, str]):  # type: ignore[no-untyped-def]
    """Two ``bot run`` processes on one PostgreSQL database; both must exit 0 at the end."""
    settings = {**settings, "DATABASE_URL": postgres_url}
    one, two = BotProcess(tmp_path, **settings), BotProcess(tmp_path, **settings)
    try:
        await asyncio.gather(one.healthy(), two.healthy())
        yield one, two
    finally:
        statuses = await asyncio.gather(
            asyncio.to_thread(one.finish), asyncio.to_thread(two.finish)
        )
    assert [s for s, _ in statuses] == [0, 0]


@pytest.mark.postgres
async def test_two_processes_share_duplicates_and_the_channel_lock(
    two_bots: tuple[BotProcess, BotProcess],
    postgres_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    fake_openai.latency = 0.2
    one, two = two_bots
    twice = mention("C0", clock.ts(), "asked once")
    stamps = [clock.ts() for _ in range(6)]

    # a second delivery of one event lands on the other process
    await asyncio.gather(one.send(twice, "EvTwice"), two.send(twice, "EvTwice"))
    # six questions in one channel, spread over both processes, all at once
    await asyncio.gather(
        *((one, two)[i % 2].send(mention("C1", ts, f"q{i}")) for i, ts in enumerate(stamps))
    )

    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 6, timeout=30)
    assert len(posts(fake_slack, "C0")) == 1
    # one turn at a time: each request saw every earlier turn of the channel, whole
    seen = sorted(
        len(r.body["messages"])
        for r in fake_openai.requests
        if r.body["messages"][-1]["content"].startswith("q")
    )
    assert seen == [2, 4, 6, 8, 10, 12]
    engine = create_engine(postgres_url)
    try:
        stored = await HistoryStore(engine).messages("C1")
        questions = await HistoryStore(engine).messages("C0")
    finally:
        await engine.dispose()
    assert len(questions) == 2
    pairs = list(zip(stored[::2], stored[1::2], strict=True))
    assert len(pairs) == 6
    assert all(a.content == f"You said: {q.content}" for q, a in pairs)


@pytest.mark.postgres
async def test_the_working_sign_does_not_wait_for_another_process_s_turn_in_the_channel(
    two_bots: tuple[BotProcess, BotProcess],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    """A question whose turn waits for another process's turn in the channel (2 s of
    model) still shows the working sign within a second; the answers come in order."""
    fake_openai.latency = 2.0
    one, two = two_bots
    first, second = clock.ts(), clock.ts()

    def signed(ts: str):  # type: ignore[no-untyped-def]
        return lambda s: any(c.args.get("timestamp") == ts for c in s.calls_to("reactions.add"))

    assert await one.send(mention("C1", first, "q0")) == 200
    await fake_slack.wait_for(signed(first))
    await fake_slack.wait_for(lambda s: len(fake_openai.requests) == 1)

    sent = time.monotonic()
    assert await two.send(mention("C1", second, "q1")) == 200
    await fake_slack.wait_for(signed(second), timeout=1.0)
    assert time.monotonic() - sent < 1.0
    assert not posts(fake_slack, "C1")  # the first turn is still with the model

    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 2, timeout=30)
    assert [p["thread_ts"] for p in posts(fake_slack, "C1")] == [first, second]
