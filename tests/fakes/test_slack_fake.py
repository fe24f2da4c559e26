"""The fake Slack Web API, driven by the real slack_sdk AsyncWebClient over HTTP: serving,
auth, rate limits, scripted failures and waiting."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.conftest import SLACK_TOKEN as TOKEN
from tests.fakes.conftest import api_error
from tests.fakes.slack_server import (
    FakeSlack,
)

TS = re.compile(r"^\d{10}\.\d{6}$")


# --------------------------------------------------------------------------------------------
# Basics


def test_serves_on_localhost(slack: FakeSlack) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/api/", slack.api_url)
    assert slack.calls == []


async def test_auth_test(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    response = await slack_client.auth_test()
    assert response["ok"] is True
    assert response["user_id"] == "UBOT"
    assert response["bot_id"] == "BBOT"
    assert response["team_id"] == "T1"
    assert response["url"].startswith("https://")
    [call] = slack.calls
    assert (call.method, call.token, call.status) == ("auth.test", TOKEN, 200)
    assert call.response["user_id"] == "UBOT"


async def test_post_and_read_back(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    first = await slack_client.chat_postMessage(channel="C1", text="hello")
    assert first["ok"] is True
    assert first["channel"] == "C1"
    assert TS.match(first["ts"])
    assert first["ts"] == "1700000000.000100"
    assert first["message"]["text"] == "hello"
    assert first["message"]["user"] == "UBOT"
    assert first["message"]["bot_id"] == "BBOT"

    reply = await slack_client.chat_postMessage(
        channel="C1", text="in thread", thread_ts=first["ts"]
    )
    assert float(reply["ts"]) > float(first["ts"])
    assert reply["message"]["thread_ts"] == first["ts"]
    await slack_client.chat_postMessage(channel="C2", text="elsewhere")

    messages = slack.messages("C1")
    assert [m["text"] for m in messages] == ["hello", "in thread"]
    assert messages[0]["thread_ts"] is None
    assert messages[1]["thread_ts"] == first["ts"]
    assert [m["text"] for m in slack.thread("C1", first["ts"])] == ["hello", "in thread"]
    assert [m["text"] for m in slack.messages("C2")] == ["elsewhere"]
    assert slack.messages("C3") == []

    posts = slack.calls_to("chat.postMessage")
    assert [c.args["text"] for c in posts] == ["hello", "in thread", "elsewhere"]
    assert all(c.token == TOKEN and c.ok for c in posts)
    assert "token" not in posts[0].args


async def test_posts_with_blocks(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "*hi*"}},
        {"type": "divider"},
        {
            "type": "actions",
            "elements": [
                {"type": "button", "text": {"type": "plain_text", "text": "ok"}, "action_id": "a"}
            ],
        },
    ]
    response = await slack_client.chat_postMessage(channel="C1", text="fallback", blocks=blocks)
    assert response["message"]["blocks"] == blocks
    assert slack.messages("C1")[0]["blocks"] == blocks


async def test_form_encoded_and_query_args_are_read(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "form"}}]
    response = await slack_client.api_call(
        "chat.postMessage", data={"channel": "C1", "text": "t", "blocks": json.dumps(blocks)}
    )
    assert response["ok"]
    assert slack.messages("C1")[0]["blocks"] == blocks
    # chat.delete sends its arguments in the query string
    await slack_client.chat_delete(channel="C1", ts=response["ts"])
    assert slack.messages("C1") == []
    # users.info is a GET
    user = await slack_client.users_info(user="U1")
    assert user["user"]["id"] == "U1"


async def test_missing_text_and_channel(slack_client: AsyncWebClient) -> None:
    error = await api_error(slack_client.api_call("chat.postMessage", json={"channel": "C1"}))
    assert error.response["error"] == "no_text"
    error = await api_error(slack_client.api_call("chat.postMessage", json={"text": "x"}))
    assert error.response["error"] == "channel_not_found"


# --------------------------------------------------------------------------------------------
# Auth


async def test_bad_token_is_invalid_auth(slack: FakeSlack) -> None:
    bad = AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url)
    error = await api_error(bad.chat_postMessage(channel="C1", text="hi"))
    assert error.response["error"] == "invalid_auth"
    assert error.response.status_code == 200
    assert slack.messages("C1") == []
    assert slack.calls[0].token == "xoxb-wrong"


async def test_missing_token_is_not_authed(slack: FakeSlack) -> None:
    anonymous = AsyncWebClient(token=None, base_url=slack.api_url)
    error = await api_error(anonymous.auth_test())
    assert error.response["error"] == "not_authed"


async def test_token_in_form_field(slack: FakeSlack) -> None:
    anonymous = AsyncWebClient(token=None, base_url=slack.api_url)
    response = await anonymous.api_call("auth.test", data={"token": TOKEN})
    assert response["user_id"] == "UBOT"
    assert slack.calls[0].token == TOKEN
    assert slack.calls[0].args == {}


async def test_unknown_method(slack_client: AsyncWebClient) -> None:
    error = await api_error(slack_client.api_call("chat.meMessage", json={"channel": "C1"}))
    assert error.response["error"] == "unknown_method"


# --------------------------------------------------------------------------------------------
# Rate limits and scripted failures


async def test_rate_limit_is_retried_by_the_sdk_handler(slack: FakeSlack) -> None:
    slack_client = AsyncWebClient(
        token=TOKEN,
        base_url=slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    slack.rate_limit_next("chat.postMessage", retry_after=0, times=1)
    response = await slack_client.chat_postMessage(channel="C1", text="eventually")
    assert response["ok"]
    calls = slack.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [429, 200]
    assert calls[0].response == {"ok": False, "error": "ratelimited"}
    assert [m["text"] for m in slack.messages("C1")] == ["eventually"]


async def test_rate_limit_without_retry(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    slack.rate_limit_next("chat.postMessage", retry_after=7, times=2)
    for _ in range(2):
        error = await api_error(slack_client.chat_postMessage(channel="C1", text="x"))
        assert error.response.status_code == 429
        assert error.response["error"] == "ratelimited"
        assert error.response.headers["Retry-After"] in ("7", ["7"])
    assert (await slack_client.chat_postMessage(channel="C1", text="x"))["ok"]
    assert len(slack.messages("C1")) == 1


async def test_a_held_request_is_not_handled_once_its_caller_gave_up(slack: FakeSlack) -> None:
    slack.hang_next("chat.postMessage", 1.0, channel="C1")
    impatient = AsyncWebClient(token=TOKEN, base_url=slack.api_url, timeout=0.3)
    with pytest.raises(TimeoutError):
        await impatient.chat_postMessage(channel="C1", text="never arrives")
    assert slack.held == [("chat.postMessage", "C1")]
    await asyncio.sleep(1.2)  # the hang is over: the request was dropped, not handled
    assert slack.messages("C1") == []
    assert (await impatient.chat_postMessage(channel="C1", text="the next one"))["ok"]
    assert [m["text"] for m in slack.messages("C1")] == ["the next one"]


async def test_a_request_held_after_it_is_handled_is_there_before_its_answer(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    slack.hang_next("chat.postMessage", 0.5, channel="C2", after=True)
    assert (await slack_client.chat_postMessage(channel="C1", text="elsewhere"))["ok"]  # not held
    started = time.monotonic()
    assert (await slack_client.chat_postMessage(channel="C2", text="late answer"))["ok"]
    assert time.monotonic() - started >= 0.5
    assert slack.held == [("chat.postMessage", "C2")]


async def test_rate_limit_applies_to_one_method(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    slack.rate_limit_next("chat.update")
    assert (await slack_client.chat_postMessage(channel="C1", text="x"))["ok"]


async def test_fail_next(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    slack.fail_next("chat.postMessage", error="channel_not_found")
    error = await api_error(slack_client.chat_postMessage(channel="C1", text="x"))
    assert error.response["error"] == "channel_not_found"
    assert (await slack_client.chat_postMessage(channel="C1", text="x"))["ok"]
    assert [c.ok for c in slack.calls] == [False, True]


async def test_latency(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    slack.latency = 0.2
    started = time.monotonic()
    await slack_client.auth_test()
    assert time.monotonic() - started >= 0.2


# --------------------------------------------------------------------------------------------
# Waiting


async def test_wait_for(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    await slack_client.chat_postMessage(channel="C1", text="one")
    await slack.wait_for(lambda s: len(s.calls_to("chat.postMessage")) >= 1, timeout=1)
    with pytest.raises(AssertionError) as info:
        await slack.wait_for(lambda s: len(s.calls_to("chat.postMessage")) >= 2, timeout=0.1)
    report = str(info.value)
    assert "condition not met within 0.1s" in report
    assert "chat.postMessage [200 ok]" in report
    assert "'one'" in report


def test_wait_for_sync(slack: FakeSlack) -> None:
    slack.add_message("C1", "x")
    slack.wait_for_sync(lambda s: len(s.messages("C1")) == 1, timeout=1)
    with pytest.raises(AssertionError, match="condition not met"):
        slack.wait_for_sync(lambda s: bool(s.calls), timeout=0.05)
