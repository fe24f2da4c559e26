"""NoDoublePostRetryHandler: which failed Web API calls the Slack client sends again."""

from __future__ import annotations

import socket

import aiohttp
import pytest
from slack_sdk.http_retry.async_handler import HttpRequest, RetryState

from bot.slack.poster import NoDoublePostRetryHandler


def call_to(method: str) -> HttpRequest:
    return HttpRequest(method="POST", url=f"https://slack.com/api/{method}", headers={})


async def refused() -> aiohttp.ClientConnectorError:
    """A real "connection refused", from a port nothing listens on."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await session.post(f"http://127.0.0.1:{port}/api/chat.postMessage")
    return info.value


@pytest.mark.parametrize("method", ["chat.postMessage", "chat.postEphemeral", "chat.update"])
async def test_a_call_that_never_reached_slack_is_sent_again(method: str) -> None:
    handler = NoDoublePostRetryHandler(max_retry_count=2)
    error = await refused()
    assert await handler.can_retry_async(state=RetryState(), request=call_to(method), error=error)


@pytest.mark.parametrize(
    ("method", "sent_again"),
    [
        ("chat.postMessage", False),
        ("chat.postEphemeral", False),
        ("chat.update", True),
        ("reactions.add", True),
    ],
)
async def test_a_post_that_may_have_reached_slack_is_not_sent_again(
    method: str, sent_again: bool
) -> None:
    handler = NoDoublePostRetryHandler(max_retry_count=2)
    error = aiohttp.ServerDisconnectedError()
    retried = await handler.can_retry_async(
        state=RetryState(), request=call_to(method), error=error
    )
    assert retried is sent_again
