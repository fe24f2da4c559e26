"""The fake Slack Web API, driven by the real slack_sdk AsyncWebClient over HTTP."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from urllib.parse import parse_qs

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_server import (
    FakeSlack,
    block_actions_payload,
    event_payload,
    signed_headers,
    url_verification_payload,
)

TOKEN = "xoxb-test"
TS = re.compile(r"^\d{10}\.\d{6}$")


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(bot_token=TOKEN, bot_user_id="UBOT", team_id="T1") as fake:
        yield fake


@pytest.fixture
async def client(slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token=TOKEN, base_url=slack.api_url)


async def api_error(call: Awaitable[object]) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        await call
    return info.value


# --------------------------------------------------------------------------------------------
# Basics


def test_serves_on_localhost(slack: FakeSlack) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/api/", slack.api_url)
    assert slack.calls == []


async def test_auth_test(slack: FakeSlack, client: AsyncWebClient) -> None:
    response = await client.auth_test()
    assert response["ok"] is True
    assert response["user_id"] == "UBOT"
    assert response["bot_id"] == "BBOT"
    assert response["team_id"] == "T1"
    assert response["url"].startswith("https://")
    [call] = slack.calls
    assert (call.method, call.token, call.status) == ("auth.test", TOKEN, 200)
    assert call.response["user_id"] == "UBOT"


async def test_post_and_read_back(slack: FakeSlack, client: AsyncWebClient) -> None:
    first = await client.chat_postMessage(channel="C1", text="hello")
    assert first["ok"] is True
    assert first["channel"] == "C1"
    assert TS.match(first["ts"])
    assert first["ts"] == "1700000000.000100"
    assert first["message"]["text"] == "hello"
    assert first["message"]["user"] == "UBOT"
    assert first["message"]["bot_id"] == "BBOT"

    reply = await client.chat_postMessage(channel="C1", text="in thread", thread_ts=first["ts"])
    assert float(reply["ts"]) > float(first["ts"])
    assert reply["message"]["thread_ts"] == first["ts"]
    await client.chat_postMessage(channel="C2", text="elsewhere")

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


async def test_posts_with_blocks(slack: FakeSlack, client: AsyncWebClient) -> None:
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
    response = await client.chat_postMessage(channel="C1", text="fallback", blocks=blocks)
    assert response["message"]["blocks"] == blocks
    assert slack.messages("C1")[0]["blocks"] == blocks


async def test_form_encoded_and_query_args_are_read(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "form"}}]
    response = await client.api_call(
        "chat.postMessage", data={"channel": "C1", "text": "t", "blocks": json.dumps(blocks)}
    )
    assert response["ok"]
    assert slack.messages("C1")[0]["blocks"] == blocks
    # chat.delete sends its arguments in the query string
    await client.chat_delete(channel="C1", ts=response["ts"])
    assert slack.messages("C1") == []
    # users.info is a GET
    user = await client.users_info(user="U1")
    assert user["user"]["id"] == "U1"


async def test_missing_text_and_channel(client: AsyncWebClient) -> None:
    error = await api_error(client.api_call("chat.postMessage", json={"channel": "C1"}))
    assert error.response["error"] == "no_text"
    error = await api_error(client.api_call("chat.postMessage", json={"text": "x"}))
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


async def test_unknown_method(client: AsyncWebClient) -> None:
    error = await api_error(client.api_call("chat.meMessage", json={"channel": "C1"}))
    assert error.response["error"] == "unknown_method"


# --------------------------------------------------------------------------------------------
# Rate limits and scripted failures


async def test_rate_limit_is_retried_by_the_sdk_handler(slack: FakeSlack) -> None:
    client = AsyncWebClient(
        token=TOKEN,
        base_url=slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    slack.rate_limit_next("chat.postMessage", retry_after=0, times=1)
    response = await client.chat_postMessage(channel="C1", text="eventually")
    assert response["ok"]
    calls = slack.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [429, 200]
    assert calls[0].response == {"ok": False, "error": "ratelimited"}
    assert [m["text"] for m in slack.messages("C1")] == ["eventually"]


async def test_rate_limit_without_retry(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.rate_limit_next("chat.postMessage", retry_after=7, times=2)
    for _ in range(2):
        error = await api_error(client.chat_postMessage(channel="C1", text="x"))
        assert error.response.status_code == 429
        assert error.response["error"] == "ratelimited"
        assert error.response.headers["Retry-After"] in ("7", ["7"])
    assert (await client.chat_postMessage(channel="C1", text="x"))["ok"]
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
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.hang_next("chat.postMessage", 0.5, channel="C2", after=True)
    assert (await client.chat_postMessage(channel="C1", text="elsewhere"))["ok"]  # not held
    started = time.monotonic()
    assert (await client.chat_postMessage(channel="C2", text="late answer"))["ok"]
    assert time.monotonic() - started >= 0.5
    assert slack.held == [("chat.postMessage", "C2")]


async def test_rate_limit_applies_to_one_method(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.rate_limit_next("chat.update")
    assert (await client.chat_postMessage(channel="C1", text="x"))["ok"]


async def test_fail_next(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.fail_next("chat.postMessage", error="channel_not_found")
    error = await api_error(client.chat_postMessage(channel="C1", text="x"))
    assert error.response["error"] == "channel_not_found"
    assert (await client.chat_postMessage(channel="C1", text="x"))["ok"]
    assert [c.ok for c in slack.calls] == [False, True]


async def test_latency(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.latency = 0.2
    started = time.monotonic()
    await client.auth_test()
    assert time.monotonic() - started >= 0.2


# --------------------------------------------------------------------------------------------
# Update, delete, limits


async def test_update_and_delete(slack: FakeSlack, client: AsyncWebClient) -> None:
    posted = await client.chat_postMessage(channel="C1", text="draft")
    updated = await client.chat_update(channel="C1", ts=posted["ts"], text="final")
    assert updated["ts"] == posted["ts"]
    assert updated["text"] == "final"
    [message] = slack.messages("C1")
    assert message["text"] == "final"
    assert message["edited"]["user"] == "UBOT"

    deleted = await client.chat_delete(channel="C1", ts=posted["ts"])
    assert deleted["ts"] == posted["ts"]
    assert slack.messages("C1") == []

    error = await api_error(client.chat_update(channel="C1", ts=posted["ts"], text="again"))
    assert error.response["error"] == "message_not_found"
    error = await api_error(client.chat_delete(channel="C1", ts=posted["ts"]))
    assert error.response["error"] == "message_not_found"
    error = await api_error(client.chat_update(channel="C2", ts="1.000000", text="x"))
    assert error.response["error"] == "message_not_found"


async def test_cannot_touch_other_peoples_messages(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = slack.add_message("C1", "a user's message", user="U1")
    error = await api_error(client.chat_update(channel="C1", ts=ts, text="x"))
    assert error.response["error"] == "cant_update_message"
    error = await api_error(client.chat_delete(channel="C1", ts=ts))
    assert error.response["error"] == "cant_delete_message"
    assert slack.messages("C1")[0]["text"] == "a user's message"


async def test_msg_too_long(slack: FakeSlack, client: AsyncWebClient) -> None:
    assert (await client.chat_postMessage(channel="C1", text="x" * 40_000))["ok"]
    error = await api_error(client.chat_postMessage(channel="C1", text="x" * 40_001))
    assert error.response["error"] == "msg_too_long"
    ts = slack.messages("C1")[0]["ts"]
    error = await api_error(client.chat_update(channel="C1", ts=ts, text="y" * 40_001))
    assert error.response["error"] == "msg_too_long"
    assert len(slack.messages("C1")) == 1


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def thumbs(label: str = "Good") -> dict:
    button = {"text": {"type": "plain_text", "text": label}, "value": "positive:1"}
    negative = {"text": {"type": "plain_text", "text": "Bad"}, "value": "negative:1"}
    return {"type": "feedback_buttons", "positive_button": button, "negative_button": negative}


@pytest.mark.parametrize(
    ("blocks", "error"),
    [
        ([section("x")] * 51, "invalid_blocks"),
        ([section("x" * 3001)], "invalid_blocks"),
        ([{"type": "section"}], "invalid_blocks"),
        ([{"text": "no type"}], "invalid_blocks"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "invalid_blocks"),
        ([{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}], "invalid_blocks"),
        (
            [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}],
            "invalid_blocks",
        ),
        ({"type": "section"}, "invalid_blocks_format"),
        ([{"type": "context_actions", "elements": []}], "invalid_blocks"),
        ([{"type": "context_actions", "elements": [{"type": "button"}]}], "invalid_blocks"),
        (
            [{"type": "context_actions", "elements": [{"type": "feedback_buttons"}]}],
            "invalid_blocks",
        ),
        ([{"type": "context_actions", "elements": [thumbs("x" * 76)]}], "invalid_blocks"),
    ],
)
async def test_invalid_blocks(client: AsyncWebClient, blocks: object, error: str) -> None:
    failure = await api_error(
        client.api_call("chat.postMessage", json={"channel": "C1", "text": "t", "blocks": blocks})
    )
    assert failure.response["error"] == error


async def test_feedback_buttons_are_accepted(slack: FakeSlack, client: AsyncWebClient) -> None:
    blocks = [section("answer"), {"type": "context_actions", "elements": [thumbs()]}]
    assert (await client.chat_postMessage(channel="C1", text="answer", blocks=blocks))["ok"]
    assert slack.messages("C1")[0]["blocks"] == blocks


async def test_files_are_served_to_the_bot_token_only(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    shared = slack.add_file("a.csv", b"x,y\n1,2\n", "text/csv", filetype="csv")
    hidden = slack.add_file("b.txt", b"secret", "text/plain", check_file_info=True)

    async with aiohttp.ClientSession() as http:
        url = shared["url_private"]
        async with http.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as ok:
            assert ok.status == 200 and await ok.read() == b"x,y\n1,2\n"
            assert ok.headers["Content-Type"].startswith("text/csv")
        async with http.get(url, allow_redirects=False) as stranger:
            assert stranger.status == 302 and "/signin" in stranger.headers["Location"]
        bad = {"Authorization": "Bearer xoxb-other"}
        async with http.get(url, headers=bad) as followed:
            assert "Sign in" in await followed.text()  # Slack's page, not the file
    assert "url_private" not in hidden and hidden["file_access"] == "check_file_info"
    info = await client.files_info(file=hidden["id"])
    assert info["file"]["url_private"].endswith("/b.txt")
    assert [(d["id"], d["authorized"]) for d in slack.file_downloads] == [
        (shared["id"], True),
        (shared["id"], False),
        (shared["id"], False),
    ]
    assert (await api_error(client.files_info(file="F0"))).response["error"] == "file_not_found"


async def test_block_limits_are_inclusive(client: AsyncWebClient) -> None:
    blocks = [section("x")] * 49 + [section("y" * 3000)]
    assert (await client.chat_postMessage(channel="C1", text="t", blocks=blocks))["ok"]


async def test_known_channels(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.known_channels = {"C1"}
    assert (await client.chat_postMessage(channel="C1", text="x"))["ok"]
    error = await api_error(client.chat_postMessage(channel="C9", text="x"))
    assert error.response["error"] == "channel_not_found"
    error = await api_error(client.reactions_add(channel="C9", timestamp="1.0", name="eyes"))
    assert error.response["error"] == "channel_not_found"


async def test_post_ephemeral(slack: FakeSlack, client: AsyncWebClient) -> None:
    response = await client.chat_postEphemeral(channel="C1", user="U1", text="only you")
    assert TS.match(response["message_ts"])
    assert slack.messages("C1") == []
    [ephemeral] = slack.ephemeral_messages
    assert (ephemeral["channel"], ephemeral["user"], ephemeral["text"]) == ("C1", "U1", "only you")
    error = await api_error(
        client.api_call("chat.postEphemeral", json={"channel": "C1", "text": "x"})
    )
    assert error.response["error"] == "user_not_in_channel"


# --------------------------------------------------------------------------------------------
# Reactions, conversations, users, assistant threads


async def test_reactions(slack: FakeSlack, client: AsyncWebClient) -> None:
    await client.reactions_add(channel="C1", timestamp="1.0001", name="eyes")
    assert slack.reactions("C1", "1.0001") == ["eyes"]
    error = await api_error(client.reactions_add(channel="C1", timestamp="1.0001", name="eyes"))
    assert error.response["error"] == "already_reacted"
    await client.reactions_remove(channel="C1", timestamp="1.0001", name="eyes")
    assert slack.reactions("C1", "1.0001") == []
    error = await api_error(client.reactions_remove(channel="C1", timestamp="1.0001", name="eyes"))
    assert error.response["error"] == "no_reaction"

    posted = await client.chat_postMessage(channel="C1", text="x")
    await client.reactions_add(channel="C1", timestamp=posted["ts"], name="white_check_mark")
    assert slack.messages("C1")[0]["reactions"] == ["white_check_mark"]


async def test_conversations_info(slack: FakeSlack, client: AsyncWebClient) -> None:
    info = await client.conversations_info(channel="C1")
    assert info["channel"]["id"] == "C1"
    assert info["channel"]["name"] == "general"
    slack.channel_names["C2"] = "support"
    assert (await client.conversations_info(channel="C2"))["channel"]["name"] == "support"
    dm = await client.conversations_info(channel="D1")
    assert dm["channel"]["is_im"] is True

    slack.known_channels = {"C1"}
    assert (await client.conversations_info(channel="C2"))["channel"]["name"] == "support"
    error = await api_error(client.conversations_info(channel="C3"))
    assert error.response["error"] == "channel_not_found"


async def test_conversations_replies(slack: FakeSlack, client: AsyncWebClient) -> None:
    metadata = {"event_type": "bot_post", "event_payload": {"post_id": "p1"}}
    parent = (await client.chat_postMessage(channel="C1", text="question"))["ts"]
    await client.chat_postMessage(channel="C1", text="answer", thread_ts=parent, metadata=metadata)
    await client.chat_postMessage(channel="C1", text="elsewhere")

    plain = await client.conversations_replies(channel="C1", ts=parent)
    assert [m["text"] for m in plain["messages"]] == ["question", "answer"]
    assert not any("metadata" in m for m in plain["messages"])
    full = await client.conversations_replies(channel="C1", ts=parent, include_all_metadata=True)
    assert full["messages"][1]["metadata"] == metadata
    pages = await client.conversations_replies(channel="C1", ts=parent, limit=1)
    assert [m["text"] async for page in pages for m in page["messages"]] == ["question", "answer"]

    for args, error in [
        ({"channel": "C1", "ts": "1.000001"}, "thread_not_found"),
        ({"channel": "C1"}, "invalid_arguments"),
        ({"ts": parent}, "channel_not_found"),
        ({"channel": "C1", "ts": parent, "cursor": "nonsense"}, "invalid_cursor"),
    ]:
        refused = await api_error(client.api_call("conversations.replies", params=args))
        assert refused.response["error"] == error
    bad = AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url)
    refused = await api_error(bad.conversations_replies(channel="C1", ts=parent))
    assert refused.response["error"] == "invalid_auth"


async def test_conversations_history(slack: FakeSlack, client: AsyncWebClient) -> None:
    metadata = {"event_type": "bot_post", "event_payload": {"post_id": "p1"}}
    first = (await client.chat_postMessage(channel="D1", text="one", metadata=metadata))["ts"]
    await client.chat_postMessage(channel="D1", text="in a thread", thread_ts=first)
    await client.chat_postMessage(channel="D1", text="two")

    newest = await client.conversations_history(channel="D1", limit=1)
    assert ([m["text"] for m in newest["messages"]], newest["has_more"]) == (["two"], True)
    full = await client.conversations_history(channel="D1", include_all_metadata=True)
    assert [(m["text"], m.get("metadata")) for m in full["messages"]] == [
        ("two", None),
        ("one", metadata),
    ]
    bad = AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url)
    refused = await api_error(bad.conversations_history(channel="D1"))
    assert refused.response["error"] == "invalid_auth"


async def test_invalid_metadata(client: AsyncWebClient) -> None:
    for metadata in ({"event_type": "", "event_payload": {}}, {"event_type": "x"}, "[]"):
        posted = client.chat_postMessage(channel="C1", text="x", metadata=metadata)
        assert (await api_error(posted)).response["error"] == "invalid_metadata_format"


async def test_users_info(slack: FakeSlack, client: AsyncWebClient) -> None:
    user = (await client.users_info(user="U1"))["user"]
    assert (user["id"], user["name"]) == ("U1", "u1")
    assert user["real_name"]
    assert user["profile"]["real_name"] == user["real_name"]
    slack.users["U2"] = {"name": "ann", "real_name": "Ann Example"}
    user = (await client.users_info(user="U2"))["user"]
    assert (user["name"], user["real_name"]) == ("ann", "Ann Example")
    assert user["profile"]["display_name"] == "ann"
    assert (await client.users_info(user="UBOT"))["user"]["is_bot"] is True
    error = await api_error(client.users_info(user="nobody"))
    assert error.response["error"] == "user_not_found"


async def test_assistant_threads(slack: FakeSlack, client: AsyncWebClient) -> None:
    key = ("D1", "1.0001")
    await client.assistant_threads_setStatus(
        channel_id="D1", thread_ts="1.0001", status="is typing"
    )
    assert slack.assistant_status[key] == "is typing"
    await client.assistant_threads_setStatus(channel_id="D1", thread_ts="1.0001", status="")
    assert slack.assistant_status[key] == ""
    prompts = [{"title": "Find a ticket", "message": "Find ticket ABC-1"}]
    await client.assistant_threads_setSuggestedPrompts(
        channel_id="D1", thread_ts="1.0001", prompts=prompts
    )
    assert slack.suggested_prompts[key] == prompts
    await client.assistant_threads_setTitle(channel_id="D1", thread_ts="1.0001", title="Tickets")
    assert slack.thread_titles[key] == "Tickets"
    error = await api_error(
        client.api_call("assistant.threads.setStatus", json={"channel_id": "D1", "status": "x"})
    )
    assert error.response["error"] == "invalid_arguments"


# --------------------------------------------------------------------------------------------
# Streaming messages


async def test_streaming_methods(slack: FakeSlack, client: AsyncWebClient) -> None:
    parent = slack.add_message("C1", "question", user="U1")
    started = await client.chat_startStream(
        channel="C1",
        thread_ts=parent,
        markdown_text="Hel",
        recipient_team_id="T1",
        recipient_user_id="U1",
    )
    ts = started["ts"]
    assert TS.match(ts)
    assert slack.thread("C1", parent)[-1]["streaming"] is True
    await client.chat_appendStream(channel="C1", ts=ts, markdown_text="lo, ")
    await client.chat_appendStream(channel="C1", ts=ts, markdown_text="world")
    assert slack.thread("C1", parent)[-1]["text"] == "Hello, world"
    stopped = await client.chat_stopStream(channel="C1", ts=ts, markdown_text="!")
    assert stopped["ts"] == ts
    message = slack.thread("C1", parent)[-1]
    assert (message["text"], message["streaming"], message["thread_ts"]) == (
        "Hello, world!",
        False,
        parent,
    )
    error = await api_error(client.chat_appendStream(channel="C1", ts=ts, markdown_text="more"))
    assert error.response["error"] == "message_not_in_streaming_state"
    error = await api_error(client.chat_appendStream(channel="C1", ts="1.0", markdown_text="x"))
    assert error.response["error"] == "message_not_found"
    error = await api_error(client.api_call("chat.startStream", json={"channel": "C1"}))
    assert error.response["error"] == "invalid_arguments"


async def test_sdk_chat_stream_helper(slack: FakeSlack, client: AsyncWebClient) -> None:
    streamer = await client.chat_stream(
        channel="C1",
        thread_ts="1.0001",
        recipient_team_id="T1",
        recipient_user_id="U1",
        buffer_size=10,
    )
    for word in ["The ", "answer ", "is ", "forty-two", "."]:
        await streamer.append(markdown_text=word)
    await streamer.stop()
    [message] = slack.messages("C1")
    assert message["text"] == "The answer is forty-two."
    assert message["streaming"] is False
    assert slack.calls_to("chat.startStream")
    assert slack.calls_to("chat.stopStream")


async def test_a_stream_in_a_channel_names_its_recipient(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    for missing in ("recipient_user_id", "recipient_team_id"):
        given = {"recipient_user_id": "U1", "recipient_team_id": "T1"}
        del given[missing]
        error = await api_error(client.chat_startStream(channel="C1", thread_ts="1.0001", **given))
        assert error.response["error"] == f"missing_{missing}"
    # in a DM it is the DM's person
    started = await client.chat_startStream(channel="D1", thread_ts="1.0001", markdown_text="hi")
    assert started["ok"]


async def test_stream_chunks_are_recorded_and_checked(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    streamer = await client.chat_stream(
        channel="C1",
        thread_ts="1.0001",
        recipient_team_id="T1",
        recipient_user_id="U1",
        task_display_mode="timeline",
    )
    task = {"type": "task_update", "id": "call_1", "title": "Looking up TASK-1 in Jira"}
    await streamer.append(chunks=[{**task, "status": "in_progress"}])
    await streamer.append(chunks=[{**task, "status": "complete"}])
    await streamer.append(markdown_text="It is **open**.")
    await streamer.stop(metadata={"event_type": "bot_post", "event_payload": {"post_id": "p"}})
    (stream,) = slack.streams("C1")
    assert [c["type"] for c in stream["chunks"]] == ["task_update", "task_update", "markdown_text"]
    assert stream["tasks"]["call_1"]["status"] == "complete"
    assert (stream["text"], stream["streaming"], stream["task_display_mode"]) == (
        "It is **open**.",
        False,
        "timeline",
    )
    assert stream["metadata"]["event_payload"] == {"post_id": "p"}

    ts = (await client.chat_startStream(channel="D1", thread_ts="1.0001", markdown_text="x"))["ts"]
    for bad in ([{"type": "task_update", "id": "1", "title": "t", "status": "done"}], [{"x": 1}]):
        error = await api_error(client.chat_appendStream(channel="D1", ts=ts, chunks=bad))
        assert error.response["error"] == "invalid_chunks"
    too_long = client.chat_appendStream(channel="D1", ts=ts, markdown_text="y" * 12_000)
    error = await api_error(too_long)
    assert error.response["error"] == "msg_too_long"


async def test_a_stream_can_be_refused_midway(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.refuse_stream_after = 2
    ts = (await client.chat_startStream(channel="D1", thread_ts="1.0001", markdown_text="a"))["ts"]
    await client.chat_appendStream(channel="D1", ts=ts, markdown_text="b")
    error = await api_error(client.chat_appendStream(channel="D1", ts=ts, markdown_text="c"))
    assert error.response["error"] == "message_not_in_streaming_state"
    error = await api_error(client.chat_stopStream(channel="D1", ts=ts))
    assert error.response["error"] == "message_not_in_streaming_state"
    (stream,) = slack.streams("D1")
    assert (stream["text"], stream["streaming"]) == ("ab", False)
    # an expired stream is an ordinary message of the bot's again
    await client.chat_update(channel="D1", ts=ts, text="replaced")
    assert slack.messages("D1")[0]["text"] == "replaced"


# --------------------------------------------------------------------------------------------
# Waiting


async def test_wait_for(slack: FakeSlack, client: AsyncWebClient) -> None:
    await client.chat_postMessage(channel="C1", text="one")
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


# --------------------------------------------------------------------------------------------
# Requests Slack sends to the bot


def test_signed_event_verifies() -> None:
    body = event_payload(
        event={
            "type": "app_mention",
            "user": "U1",
            "text": "<@UBOT> hi",
            "ts": "1.0001",
            "channel": "C1",
        },
        event_id="Ev1",
        team_id="T1",
    )
    headers = signed_headers(body, signing_secret="secret")
    verifier = SignatureVerifier("secret")
    assert verifier.is_valid_request(body, headers)
    assert not SignatureVerifier("other").is_valid_request(body, headers)
    assert not verifier.is_valid_request(body.replace("hi", "ho"), headers)
    assert headers["Content-Type"] == "application/json"
    assert "X-Slack-Retry-Num" not in headers

    payload = json.loads(body)
    assert payload["type"] == "event_callback"
    assert payload["event_id"] == "Ev1"
    assert payload["team_id"] == "T1"
    assert payload["event"]["text"] == "<@UBOT> hi"
    assert payload["event"]["event_ts"] == "1.0001"
    assert payload["authorizations"][0]["user_id"] == "UBOT"
    assert payload["authorizations"][0]["is_bot"] is True
    assert isinstance(payload["event_time"], int)


def test_signed_headers_retry_and_old_timestamp() -> None:
    body = event_payload(event={"type": "message", "text": "x", "ts": "1.0"})
    headers = signed_headers(body, "secret", retry_num=1, retry_reason="http_timeout")
    assert headers["X-Slack-Retry-Num"] == "1"
    assert headers["X-Slack-Retry-Reason"] == "http_timeout"
    stale = signed_headers(body, "secret", timestamp=int(time.time()) - 3600)
    assert not SignatureVerifier("secret").is_valid_request(body, stale)  # replayed: too old
    assert json.loads(body)["event_id"] != json.loads(event_payload(event={}))["event_id"]


def test_block_actions_payload() -> None:
    body = block_actions_payload(
        "feedback_good",
        "42",
        user_id="U7",
        channel_id="C3",
        message_ts="1.0002",
        thread_ts="1.0001",
        response_url="https://hooks.example/1",
    )
    headers = signed_headers(body, "secret")
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert SignatureVerifier("secret").is_valid_request(body, headers)
    [raw] = parse_qs(body)["payload"]
    payload = json.loads(raw)
    assert payload["type"] == "block_actions"
    assert payload["user"]["id"] == "U7"
    assert payload["channel"]["id"] == "C3"
    assert payload["message"]["ts"] == "1.0002"
    assert payload["message"]["thread_ts"] == "1.0001"
    assert payload["container"]["channel_id"] == "C3"
    assert payload["trigger_id"]
    assert payload["response_url"] == "https://hooks.example/1"
    [action] = payload["actions"]
    assert (action["action_id"], action["value"], action["block_id"]) == (
        "feedback_good",
        "42",
        "b1",
    )
    assert "response_url" not in json.loads(parse_qs(block_actions_payload("a"))["payload"][0])


def test_url_verification_payload() -> None:
    payload = json.loads(url_verification_payload("abc"))
    assert payload == {
        "token": "verification-token",
        "challenge": "abc",
        "type": "url_verification",
    }
