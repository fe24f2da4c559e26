"""Socket Mode against a local fake websocket endpoint: envelopes are acked at once, answered
once (a redelivery included), and the HTTP side still serves /healthz but not /slack/events."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.config import load_settings
from bot.slack.runtime import SlackRuntime
from bot.web.app import create_app
from bot.wiring import build_services
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.serve import ServedApp, serve_in_thread
from tests.fakes.slack_server import event_payload
from tests.fakes.socket_mode import FakeSlackWithSocketMode, FakeSocketMode
from tests.scenarios.slack.conftest import BOT, TOKEN, Clock, echo, mention, posts

ANSWERED = 'bot_turns_total{outcome="answered"}'


async def answered_turns(served: ServedApp) -> float:
    headers = {"Authorization": "Bearer metrics-token"}
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{served.url}/metrics", headers=headers)
    assert response.status_code == 200
    (line,) = [x for x in response.text.splitlines() if x.startswith(ANSWERED)]
    return float(line.split()[-1])


@pytest.fixture
def socket_mode() -> Iterator[FakeSocketMode]:
    server = FakeSocketMode()
    yield server
    server.stop()


@pytest.fixture
def slack(socket_mode: FakeSocketMode) -> Iterator[FakeSlackWithSocketMode]:
    with FakeSlackWithSocketMode(socket_mode, bot_token=TOKEN, bot_user_id=BOT) as fake:
        yield fake


@pytest.fixture
def served(
    sqlite_url: str, slack: FakeSlackWithSocketMode, fake_openai: FakeOpenAI
) -> Iterator[ServedApp]:
    fake_openai.responder = echo
    settings = load_settings(
        DATABASE_URL=sqlite_url,
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_APP_TOKEN=slack.app_token,
        SLACK_SIGNING_SECRET=None,
        SLACK_API_URL=slack.api_url,
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=fake_openai.base_url,
        STREAM_ANSWERS="off",  # these read posted answers (streams: test_streaming)
        METRICS_TOKEN="metrics-token",
    )
    services = build_services(settings)
    with serve_in_thread(
        create_app(services, SlackRuntime(settings, services, socket_mode=True))
    ) as app:
        yield app


async def test_socket_mode_events_are_acked_at_once_and_answered_once(
    served: ServedApp,
    socket_mode: FakeSocketMode,
    slack: FakeSlackWithSocketMode,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    fake_openai.latency = 1.0
    socket_mode.wait_connected()
    answered_before = await answered_turns(served)
    ts = clock.ts()
    payload = json.loads(event_payload(mention("C1", ts, "over the socket")))

    first = socket_mode.send_event(payload)
    assert socket_mode.wait_acked(first) < 0.5
    again = socket_mode.send_event(payload, retry_attempt=1, retry_reason="timeout")
    assert socket_mode.wait_acked(again) < 0.5

    await slack.wait_for(lambda s: bool(s.calls_to("reactions.remove")), timeout=10)
    (answer,) = posts(slack)
    assert answer["thread_ts"] == ts and answer["text"] == "You said: over the socket"
    assert slack.connections_opened == 1 and len(fake_openai.requests) == 1
    # /metrics is served beside it, and counted the turn
    assert await answered_turns(served) == answered_before + 1


@pytest.mark.parametrize("dropped_by", ["disconnect", "close"])
async def test_a_recycled_or_closed_connection_is_replaced_and_nothing_is_answered_twice(
    served: ServedApp,
    socket_mode: FakeSocketMode,
    slack: FakeSlackWithSocketMode,
    clock: Clock,
    dropped_by: str,
) -> None:
    """Slack recycles a connection with a ``disconnect`` message, or closes it: the bot
    opens a new one (a new URL from apps.connections.open); an event answered before the
    swap and redelivered on the new connection is not answered again, a new one is."""
    socket_mode.wait_connected()
    before, after = clock.ts(), clock.ts()
    first = json.loads(event_payload(mention("C1", before, "before the swap")))
    socket_mode.wait_acked(socket_mode.send_event(first))
    await slack.wait_for(lambda s: len(posts(s)) == 1, timeout=10)

    if dropped_by == "disconnect":
        socket_mode.disconnect("refresh_requested")
    else:
        socket_mode.close_newest()
    socket_mode.wait_connected(timeout=15, connections=2)

    again = socket_mode.send_event(first, retry_attempt=1, retry_reason="timeout")
    new = socket_mode.send_event(json.loads(event_payload(mention("C1", after, "after it"))))
    assert socket_mode.wait_acked(again) < 1 and socket_mode.wait_acked(new) < 1
    await slack.wait_for(lambda s: len(posts(s)) == 2, timeout=10)
    await slack.wait_for(lambda s: len(s.calls_to("reactions.remove")) == 2, timeout=10)
    assert [p["text"] for p in posts(slack)] == ["You said: before the swap", "You said: after it"]
    assert slack.connections_opened == 2


async def test_socket_mode_serves_healthz_but_no_events_endpoint(served: ServedApp) -> None:
    async with httpx.AsyncClient() as client:
        health = await client.get(f"{served.url}/healthz")
        events = await client.post(f"{served.url}/slack/events", content="{}")
    assert health.status_code == 200
    assert events.status_code == 404


def test_a_refused_app_token_stops_start_up_with_one_line(
    tmp_path: Path, sqlite_url: str, slack: FakeSlackWithSocketMode, fake_openai: FakeOpenAI
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_"))}
    env.update(
        DATABASE_URL=sqlite_url,
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_APP_TOKEN="xapp-revoked",
        SLACK_API_URL=slack.api_url,
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=fake_openai.base_url,
        LOG_LEVEL="WARNING",
    )
    done = subprocess.run(
        [sys.executable, "-m", "bot", "run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and "SLACK_APP_TOKEN was refused" in done.stderr


async def test_a_malformed_event_over_the_socket_is_acked_and_nothing_else(
    served: ServedApp,
    socket_mode: FakeSocketMode,
    slack: FakeSlackWithSocketMode,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    socket_mode.wait_connected()
    odd = [{"user": {"id": "U1"}}, {"text": ["hello"]}, {"ts": {"a": 1}}, {"channel": 5}]
    with caplog.at_level(logging.INFO):
        for fields in odd:
            event = {**mention("C1", clock.ts()), **fields}
            sent = socket_mode.send_event(json.loads(event_payload(event)))
            assert socket_mode.wait_acked(sent) < 0.5
    assert not [r for r in caplog.records if r.exc_info is not None]
    ts = clock.ts()
    socket_mode.send_event(json.loads(event_payload(mention("C1", ts, "and now?"))))
    await slack.wait_for(lambda s: bool(s.calls_to("reactions.remove")), timeout=10)
    (answer,) = posts(slack)
    assert answer["thread_ts"] == ts and answer["text"] == "You said: and now?"
