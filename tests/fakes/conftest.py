"""Fixtures of the fakes' own tests: a fake Slack and the real slack_sdk client pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterator

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

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
