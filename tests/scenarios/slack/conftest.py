"""The bot's real ASGI app under uvicorn (serve_in_thread), its Slack Web API calls going to the
fake Slack and its model requests to the fake OpenAI; requests signed as Slack signs them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from bot.config import load_settings
from bot.jobs.inbox import Inbox
from bot.slack.runtime import SlackRuntime
from bot.store.db import create_engines
from bot.store.history import HistoryStore
from bot.web.app import create_app
from bot.wiring import build_services
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, Request
from tests.fakes.serve import ServedApp, serve_in_thread
from tests.fakes.slack_server import FakeSlack, event_payload, signed_headers

SECRET = "test-signing-secret"
TOKEN = "xoxb-test"
BOT = "UBOT"


def echo(request: Request) -> Reply:
    """The fake model's default: it repeats the newest user message."""
    conversation = request.body.get("messages") or request.body.get("input") or []
    said = next((m.get("content") for m in reversed(conversation) if m.get("role") == "user"), "")
    return Reply(text=f"You said: {said}")


class Clock:
    """Slack-like message timestamps, increasing."""

    def __init__(self) -> None:
        self._next = int(time.time()) * 1_000_000

    def ts(self) -> str:
        self._next += 100
        return f"{self._next // 1_000_000}.{self._next % 1_000_000:06d}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


def mention(channel: str, ts: str, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "channel": channel,
        "user": "U1",
        "text": f"<@{BOT}> {text}",
        "ts": ts,
        **extra,
    }


def dm(channel: str, ts: str, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": channel,
        "channel_type": "im",
        "user": "U1",
        "text": text,
        "ts": ts,
        **extra,
    }


@dataclass
class RunningBot:
    """The app serving on 127.0.0.1."""

    served: ServedApp
    runtime: SlackRuntime

    @property
    def url(self) -> str:
        return self.served.url

    async def post(self, body: str | bytes, headers: dict[str, str]) -> httpx.Response:
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(f"{self.url}/slack/events", content=body, headers=headers)

    async def send(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        timestamp: int | None = None,
    ) -> httpx.Response:
        """Deliver ``event`` as Slack does: wrapped, signed, over HTTP."""
        body = event_payload(event, event_id=event_id)
        headers = signed_headers(
            body,
            SECRET,
            timestamp=timestamp,
            retry_num=retry_num,
            retry_reason="http_timeout" if retry_num else None,
        )
        return await self.post(body, headers)

    @property
    def in_flight(self) -> int:
        return self.runtime.in_flight

    async def idle(self, timeout: float = 10) -> None:  # noqa: ASYNC109 - a polling deadline
        """Until no turn (nor deletion) is running any more."""
        deadline = time.monotonic() + timeout
        while self.in_flight:
            assert time.monotonic() < deadline, f"{self.in_flight} turn(s) still running"
            await asyncio.sleep(0.01)

    def stop(self) -> None:
        self.served.stop(timeout=35)


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    with FakeSlack(bot_token=TOKEN, bot_user_id=BOT) as slack:
        yield slack


@pytest.fixture
def fake_jira() -> Iterator[FakeJira]:
    with FakeJira(email="bot@example.com", api_token="jira-token") as jira:
        yield jira


@pytest.fixture
def bot_database_url(sqlite_url: str) -> str:
    """SQLite; a module where the database matters overrides this with ``database_url``
    (SQLite, and PostgreSQL when TEST_DATABASE_URL is set)."""
    return sqlite_url


@pytest.fixture
def start_bot(
    bot_database_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> Iterator[Callable[..., RunningBot]]:
    """``start_bot(**settings)``: the app in HTTP mode on this test's database."""
    fake_openai.responder = echo
    bots: list[RunningBot] = []

    def start(**overrides: Any) -> RunningBot:
        settings = load_settings(
            **{
                "DATABASE_URL": bot_database_url,
                "SLACK_BOT_TOKEN": TOKEN,
                "SLACK_SIGNING_SECRET": SECRET,
                "SLACK_API_URL": fake_slack.api_url,
                "OPENAI_API_KEY": "test-key",
                "OPENAI_BASE_URL": fake_openai.base_url,
                "ADMIN_TOKEN": None,
                "MCP_CONFIG": None,  # none from the developer's shell
                # these scenarios read posted answers; test_streaming streams (the default)
                "STREAM_ANSWERS": "off",
                **overrides,
            }
        )
        services = build_services(settings)
        runtime = SlackRuntime(settings, services, socket_mode=False)
        bot = RunningBot(serve_in_thread(create_app(services, runtime)), runtime)
        bots.append(bot)
        return bot

    yield start
    for bot in bots:
        bot.stop()


@pytest.fixture
def bot(start_bot: Callable[..., RunningBot]) -> RunningBot:
    return start_bot()


@dataclass
class Database:
    """The test's database, read from the test's own event loop."""

    history: HistoryStore
    #: the jobs table (bot.jobs), as another process sees it
    inbox: Inbox


@pytest.fixture
async def db(bot_database_url: str) -> AsyncIterator[Database]:
    engines = create_engines(bot_database_url)
    yield Database(HistoryStore(engines), Inbox(engines))
    await engines.dispose()


def posts(slack: FakeSlack, channel: str | None = None) -> list[dict[str, Any]]:
    """The args of every chat.postMessage, in order (of one channel, if given)."""
    calls = [c.args for c in slack.calls_to("chat.postMessage")]
    return [c for c in calls if channel is None or c.get("channel") == channel]


def turn_finished(channel: str, ts: str) -> Callable[[FakeSlack], bool]:
    """The working sign is taken off the message: its turn is over, answer posted."""
    return lambda slack: any(
        c.args.get("channel") == channel and c.args.get("timestamp") == ts
        for c in slack.calls_to("reactions.remove")
    )
