"""Fixtures of the fakes' own tests: a fake Slack and the real slack_sdk client pointed at it,
the real openai client pointed at the fake OpenAI server, and the bodies the tests send it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any

import httpx
import openai
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack

SLACK_TOKEN = "xoxb-test"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(bot_token=SLACK_TOKEN, bot_user_id="UBOT", team_id="T1") as fake:
        yield fake


@pytest.fixture
async def slack_client(slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token=SLACK_TOKEN, base_url=slack.api_url)


async def api_error(call: Awaitable[object]) -> SlackApiError:
    """The Slack error ``call`` raises (the test fails if it raises none)."""
    with pytest.raises(SlackApiError) as info:
        await call
    return info.value


OPENAI_KEY = "test-key"
MODEL = "gpt-4o"

NOW_CHAT = {
    "type": "function",
    "function": {
        "name": "now",
        "description": "The current time.",
        "parameters": {"type": "object", "properties": {}},
    },
}
NOW_RESP = {
    "type": "function",
    "name": "now",
    "description": "The current time.",
    "parameters": {"type": "object", "properties": {}},
    "strict": False,
}
WEATHER_CHAT = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
WEATHER_RESP = {
    "type": "function",
    "name": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}
USER = {"role": "user", "content": "What time is it?"}


@pytest.fixture
async def openai_client(fake_openai: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    """The real client of the fake OpenAI server, with no retries."""
    async with openai.AsyncOpenAI(
        base_url=fake_openai.base_url, api_key=OPENAI_KEY, max_retries=0
    ) as client:
        yield client


def raw_post(
    fake: FakeOpenAI, path: str, body: dict[str, Any], key: str | None = OPENAI_KEY
) -> httpx.Response:
    """``body`` posted as is to the fake OpenAI server's ``path`` (the client would check it)."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.post(f"{fake.base_url}/{path}", json=body, headers=headers, timeout=5)
