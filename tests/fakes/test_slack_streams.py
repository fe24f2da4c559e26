"""The fake Slack's streaming methods (chat.startStream/appendStream/stopStream), driven by
the real slack_sdk AsyncWebClient."""

from __future__ import annotations

import re

from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.conftest import api_error
from tests.fakes.slack_server import (
    FakeSlack,
)

TS = re.compile(r"^\d{10}\.\d{6}$")


# --------------------------------------------------------------------------------------------
# Streaming messages


async def test_streaming_methods(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    parent = slack.add_message("C1", "question", user="U1")
    started = await slack_client.chat_startStream(
        channel="C1",
        thread_ts=parent,
        markdown_text="Hel",
        recipient_team_id="T1",
        recipient_user_id="U1",
    )
    ts = started["ts"]
    assert TS.match(ts)
    assert slack.thread("C1", parent)[-1]["streaming"] is True
    await slack_client.chat_appendStream(channel="C1", ts=ts, markdown_text="lo, ")
    await slack_client.chat_appendStream(channel="C1", ts=ts, markdown_text="world")
    assert slack.thread("C1", parent)[-1]["text"] == "Hello, world"
    stopped = await slack_client.chat_stopStream(channel="C1", ts=ts, markdown_text="!")
    assert stopped["ts"] == ts
    message = slack.thread("C1", parent)[-1]
    assert (message["text"], message["streaming"], message["thread_ts"]) == (
        "Hello, world!",
        False,
        parent,
    )
    error = await api_error(
        slack_client.chat_appendStream(channel="C1", ts=ts, markdown_text="more")
    )
    assert error.response["error"] == "message_not_in_streaming_state"
    error = await api_error(
        slack_client.chat_appendStream(channel="C1", ts="1.0", markdown_text="x")
    )
    assert error.response["error"] == "message_not_found"
    error = await api_error(slack_client.api_call("chat.startStream", json={"channel": "C1"}))
    assert error.response["error"] == "invalid_arguments"


async def test_sdk_chat_stream_helper(slack: FakeSlack, slack_client: AsyncWebClient) -> None:
    streamer = await slack_client.chat_stream(
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
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    for missing in ("recipient_user_id", "recipient_team_id"):
        given = {"recipient_user_id": "U1", "recipient_team_id": "T1"}
        del given[missing]
        error = await api_error(
            slack_client.chat_startStream(channel="C1", thread_ts="1.0001", **given)
        )
        assert error.response["error"] == f"missing_{missing}"
    # in a DM it is the DM's person
    started = await slack_client.chat_startStream(
        channel="D1", thread_ts="1.0001", markdown_text="hi"
    )
    assert started["ok"]


async def test_stream_chunks_are_recorded_and_checked(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    streamer = await slack_client.chat_stream(
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

    ts = (await slack_client.chat_startStream(channel="D1", thread_ts="1.0001", markdown_text="x"))[
        "ts"
    ]
    for bad in ([{"type": "task_update", "id": "1", "title": "t", "status": "done"}], [{"x": 1}]):
        error = await api_error(slack_client.chat_appendStream(channel="D1", ts=ts, chunks=bad))
        assert error.response["error"] == "invalid_chunks"
    too_long = slack_client.chat_appendStream(channel="D1", ts=ts, markdown_text="y" * 12_000)
    error = await api_error(too_long)
    assert error.response["error"] == "msg_too_long"


async def test_a_stream_can_be_refused_midway(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    slack.refuse_stream_after = 2
    ts = (await slack_client.chat_startStream(channel="D1", thread_ts="1.0001", markdown_text="a"))[
        "ts"
    ]
    await slack_client.chat_appendStream(channel="D1", ts=ts, markdown_text="b")
    error = await api_error(slack_client.chat_appendStream(channel="D1", ts=ts, markdown_text="c"))
    assert error.response["error"] == "message_not_in_streaming_state"
    error = await api_error(slack_client.chat_stopStream(channel="D1", ts=ts))
    assert error.response["error"] == "message_not_in_streaming_state"
    (stream,) = slack.streams("D1")
    assert (stream["text"], stream["streaming"]) == ("ab", False)
    # an expired stream is an ordinary message of the bot's again
    await slack_client.chat_update(channel="D1", ts=ts, text="replaced")
    assert slack.messages("D1")[0]["text"] == "replaced"
