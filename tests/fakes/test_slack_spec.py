"""The fake Slack takes, for each method, only the arguments Slack publishes for it."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.conftest import api_error
from tests.fakes.slack_server import FakeSlack
from tests.fakes.slack_spec import METHODS


@pytest.mark.parametrize(
    ("method", "arguments", "unknown"),
    [
        ("chat.postMessage", {"channel": "C1", "text": "hi", "reply_to": "1.2"}, "reply_to"),
        (
            "chat.update",
            {"channel": "C1", "ts": "1.2", "text": "hi", "thread_ts": "1.1"},
            "thread_ts",
        ),
        ("reactions.add", {"channel": "C1", "timestamp": "1.2", "emoji": "eyes"}, "emoji"),
        ("conversations.replies", {"channel": "C1", "ts": "1.2", "metadata": True}, "metadata"),
        ("chat.startStream", {"channel": "D1", "thread_ts": "1.2", "text": "hi"}, "text"),
        (
            "assistant.threads.setStatus",
            {"channel": "D1", "thread_ts": "1.2", "status": ""},
            "channel",
        ),
    ],
)
async def test_an_argument_the_method_does_not_take_is_refused(
    slack: FakeSlack,
    slack_client: AsyncWebClient,
    method: str,
    arguments: dict[str, Any],
    unknown: str,
) -> None:
    error = await api_error(slack_client.api_call(method, json=arguments))

    assert error.response["error"] == "invalid_arguments"
    assert error.response["response_metadata"]["messages"] == [
        f"[ERROR] unsupported argument: {unknown} [json-pointer:/{unknown}]"
    ]
    assert slack.messages("C1") == slack.messages("D1") == []


async def test_the_arguments_newer_than_the_spec_are_taken(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    metadata = {"event_type": "bot_post", "event_payload": {"post_id": "p1"}}
    posted = await slack_client.chat_postMessage(channel="C1", text="hi", metadata=metadata)
    await slack_client.chat_update(channel="C1", ts=posted["ts"], text="hello", metadata=metadata)
    read = await slack_client.conversations_history(channel="C1", include_all_metadata=True)

    assert read["messages"][0]["metadata"] == metadata


async def test_every_method_of_the_table_is_served(slack_client: AsyncWebClient) -> None:
    # apps.connections.open takes the app-level token (tests.fakes.socket_mode)
    for method in [m for m, published in METHODS.items() if published.token == "bot"]:
        try:
            await slack_client.api_call(method, json={})
        except SlackApiError as refused:  # any answer but unknown_method
            assert refused.response["error"] != "unknown_method", method
    unknown = await api_error(slack_client.api_call("chat.scheduleMessage", json={}))
    assert unknown.response["error"] == "unknown_method"
