"""The fake Slack's message methods, driven by the real slack_sdk AsyncWebClient: posts,
updates and their limits, reactions, conversations, users, assistant threads."""

from __future__ import annotations

import re

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.conftest import SLACK_TOKEN as TOKEN
from tests.fakes.conftest import api_error
from tests.fakes.slack_server import (
    FakeSlack,
)

TS = re.compile(r"^\d{10}\.\d{6}$")


# --------------------------------------------------------------------------------------------
# Update, delete, limits


async def test_update_and_delete(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    posted = await slack_client.chat_postMessage(channel="C1", text="draft")
    updated = await slack_client.chat_update(channel="C1", ts=posted["ts"], text="final")
    assert updated["ts"] == posted["ts"]
    assert updated["text"] == "final"
    [message] = slack.messages("C1")
    assert message["text"] == "final"
    assert message["edited"]["user"] == "UBOT"

    deleted = await slack_client.chat_delete(channel="C1", ts=posted["ts"])
    assert deleted["ts"] == posted["ts"]
    assert slack.messages("C1") == []

    error = await api_error(slack_client.chat_update(channel="C1", ts=posted["ts"], text="again"))
    assert error.response["error"] == "message_not_found"
    error = await api_error(slack_client.chat_delete(channel="C1", ts=posted["ts"]))
    assert error.response["error"] == "message_not_found"
    error = await api_error(slack_client.chat_update(channel="C2", ts="1.000000", text="x"))
    assert error.response["error"] == "message_not_found"


async def test_cannot_touch_other_peoples_messages(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    ts = slack.add_message("C1", "a user's message", user="U1")
    error = await api_error(slack_client.chat_update(channel="C1", ts=ts, text="x"))
    assert error.response["error"] == "cant_update_message"
    error = await api_error(slack_client.chat_delete(channel="C1", ts=ts))
    assert error.response["error"] == "cant_delete_message"
    assert slack.messages("C1")[0]["text"] == "a user's message"


async def test_msg_too_long(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    assert (await slack_client.chat_postMessage(channel="C1", text="x" * 40_000))["ok"]
    error = await api_error(slack_client.chat_postMessage(channel="C1", text="x" * 40_001))
    assert error.response["error"] == "msg_too_long"
    ts = slack.messages("C1")[0]["ts"]
    error = await api_error(slack_client.chat_update(channel="C1", ts=ts, text="y" * 40_001))
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
async def test_invalid_blocks(slack_client: AsyncWebClient, blocks: object, error: str) -> None:
    failure = await api_error(
        slack_client.api_call(
            "chat.postMessage", json={"channel": "C1", "text": "t", "blocks": blocks}
        )
    )
    assert failure.response["error"] == error


async def test_feedback_buttons_are_accepted(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    blocks = [section("answer"), {"type": "context_actions", "elements": [thumbs()]}]
    assert (await slack_client.chat_postMessage(channel="C1", text="answer", blocks=blocks))["ok"]
    assert slack.messages("C1")[0]["blocks"] == blocks


async def test_files_are_served_to_the_bot_token_only(
    slack: FakeSlack, slack_client: AsyncWebClient
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
    info = await slack_client.files_info(file=hidden["id"])
    assert info["file"]["url_private"].endswith("/b.txt")
    assert [(d["id"], d["authorized"]) for d in slack.file_downloads] == [
        (shared["id"], True),
        (shared["id"], False),
        (shared["id"], False),
    ]
    assert (await api_error(slack_client.files_info(file="F0"))).response[
        "error"
    ] == "file_not_found"


async def test_block_limits_are_inclusive(slack_client: AsyncWebClient) -> None:
    blocks = [section("x")] * 49 + [section("y" * 3000)]
    assert (await slack_client.chat_postMessage(channel="C1", text="t", blocks=blocks))["ok"]


async def test_known_channels(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    slack.known_channels = {"C1"}
    assert (await slack_client.chat_postMessage(channel="C1", text="x"))["ok"]
    error = await api_error(slack_client.chat_postMessage(channel="C9", text="x"))
    assert error.response["error"] == "channel_not_found"
    error = await api_error(slack_client.reactions_add(channel="C9", timestamp="1.0", name="eyes"))
    assert error.response["error"] == "channel_not_found"


async def test_post_ephemeral(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    response = await slack_client.chat_postEphemeral(channel="C1", user="U1", text="only you")
    assert TS.match(response["message_ts"])
    assert slack.messages("C1") == []
    [ephemeral] = slack.ephemeral_messages
    assert (ephemeral["channel"], ephemeral["user"], ephemeral["text"]) == ("C1", "U1", "only you")
    error = await api_error(
        slack_client.api_call("chat.postEphemeral", json={"channel": "C1", "text": "x"})
    )
    assert error.response["error"] == "user_not_in_channel"


# --------------------------------------------------------------------------------------------
# Reactions, conversations, users, assistant threads


async def test_reactions(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    await slack_client.reactions_add(channel="C1", timestamp="1.0001", name="eyes")
    assert slack.reactions("C1", "1.0001") == ["eyes"]
    error = await api_error(
        slack_client.reactions_add(channel="C1", timestamp="1.0001", name="eyes")
    )
    assert error.response["error"] == "already_reacted"
    await slack_client.reactions_remove(channel="C1", timestamp="1.0001", name="eyes")
    assert slack.reactions("C1", "1.0001") == []
    error = await api_error(
        slack_client.reactions_remove(channel="C1", timestamp="1.0001", name="eyes")
    )
    assert error.response["error"] == "no_reaction"

    posted = await slack_client.chat_postMessage(channel="C1", text="x")
    await slack_client.reactions_add(channel="C1", timestamp=posted["ts"], name="white_check_mark")
    assert slack.messages("C1")[0]["reactions"] == ["white_check_mark"]


async def test_conversations_info(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    info = await slack_client.conversations_info(channel="C1")
    assert info["channel"]["id"] == "C1"
    assert info["channel"]["name"] == "general"
    slack.channel_names["C2"] = "support"
    assert (await slack_client.conversations_info(channel="C2"))["channel"]["name"] == "support"
    dm = await slack_client.conversations_info(channel="D1")
    assert dm["channel"]["is_im"] is True

    slack.known_channels = {"C1"}
    assert (await slack_client.conversations_info(channel="C2"))["channel"]["name"] == "support"
    error = await api_error(slack_client.conversations_info(channel="C3"))
    assert error.response["error"] == "channel_not_found"


async def test_conversations_replies(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    metadata = {"event_type": "bot_post", "event_payload": {"post_id": "p1"}}
    parent = (await slack_client.chat_postMessage(channel="C1", text="question"))["ts"]
    await slack_client.chat_postMessage(
        channel="C1", text="answer", thread_ts=parent, metadata=metadata
    )
    await slack_client.chat_postMessage(channel="C1", text="elsewhere")

    plain = await slack_client.conversations_replies(channel="C1", ts=parent)
    assert [m["text"] for m in plain["messages"]] == ["question", "answer"]
    assert not any("metadata" in m for m in plain["messages"])
    full = await slack_client.conversations_replies(
        channel="C1", ts=parent, include_all_metadata=True
    )
    assert full["messages"][1]["metadata"] == metadata
    pages = await slack_client.conversations_replies(channel="C1", ts=parent, limit=1)
    assert [m["text"] async for page in pages for m in page["messages"]] == ["question", "answer"]

    for args, error in [
        ({"channel": "C1", "ts": "1.000001"}, "thread_not_found"),
        ({"channel": "C1"}, "invalid_arguments"),
        ({"ts": parent}, "channel_not_found"),
        ({"channel": "C1", "ts": parent, "cursor": "nonsense"}, "invalid_cursor"),
    ]:
        refused = await api_error(slack_client.api_call("conversations.replies", params=args))
        assert refused.response["error"] == error
    bad = AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url)
    refused = await api_error(bad.conversations_replies(channel="C1", ts=parent))
    assert refused.response["error"] == "invalid_auth"


async def test_conversations_history(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    metadata = {"event_type": "bot_post", "event_payload": {"post_id": "p1"}}
    first = (await slack_client.chat_postMessage(channel="D1", text="one", metadata=metadata))["ts"]
    await slack_client.chat_postMessage(channel="D1", text="in a thread", thread_ts=first)
    await slack_client.chat_postMessage(channel="D1", text="two")

    newest = await slack_client.conversations_history(channel="D1", limit=1)
    assert ([m["text"] for m in newest["messages"]], newest["has_more"]) == (["two"], True)
    full = await slack_client.conversations_history(channel="D1", include_all_metadata=True)
    assert [(m["text"], m.get("metadata")) for m in full["messages"]] == [
        ("two", None),
        ("one", metadata),
    ]
    bad = AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url)
    refused = await api_error(bad.conversations_history(channel="D1"))
    assert refused.response["error"] == "invalid_auth"


async def test_invalid_metadata(slack_client: AsyncWebClient) -> None:
    for metadata in ({"event_type": "", "event_payload": {}}, {"event_type": "x"}, "[]"):
        posted = slack_client.chat_postMessage(channel="C1", text="x", metadata=metadata)
        assert (await api_error(posted)).response["error"] == "invalid_metadata_format"


async def test_users_info(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    user = (await slack_client.users_info(user="U1"))["user"]
    assert (user["id"], user["name"]) == ("U1", "u1")
    assert user["real_name"]
    assert user["profile"]["real_name"] == user["real_name"]
    slack.users["U2"] = {"name": "ann", "real_name": "Ann Example"}
    user = (await slack_client.users_info(user="U2"))["user"]
    assert (user["name"], user["real_name"]) == ("ann", "Ann Example")
    assert user["profile"]["display_name"] == "ann"
    assert (await slack_client.users_info(user="UBOT"))["user"]["is_bot"] is True
    error = await api_error(slack_client.users_info(user="nobody"))
    assert error.response["error"] == "user_not_found"


async def test_assistant_threads(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    key = ("D1", "1.0001")
    await slack_client.assistant_threads_setStatus(
        channel_id="D1", thread_ts="1.0001", status="is typing"
    )
    assert slack.assistant_status[key] == "is typing"
    await slack_client.assistant_threads_setStatus(channel_id="D1", thread_ts="1.0001", status="")
    assert slack.assistant_status[key] == ""
    prompts = [{"title": "Find a ticket", "message": "Find ticket ABC-1"}]
    await slack_client.assistant_threads_setSuggestedPrompts(
        channel_id="D1", thread_ts="1.0001", prompts=prompts
    )
    assert slack.suggested_prompts[key] == prompts
    await slack_client.assistant_threads_setTitle(
        channel_id="D1", thread_ts="1.0001", title="Tickets"
    )
    assert slack.thread_titles[key] == "Tickets"
    error = await api_error(
        slack_client.api_call(
            "assistant.threads.setStatus", json={"channel_id": "D1", "status": "x"}
        )
    )
    assert error.response["error"] == "invalid_arguments"
