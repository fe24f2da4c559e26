"""Streamed answers (STREAM_ANSWERS=on, the default; the other scenarios turn it off):
written with Slack's streaming methods as the model writes it, each tool call a task of the
message, and the whole answer shown once whatever Slack does with the stream."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.conversations import Reply
from bot.messages import Outcome
from bot.slack.events import Thread
from bot.slack.format import format_answer
from bot.slack.poster import Poster
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import Fail, FakeOpenAI, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import (
    CallTimes,
    answers,
    jira_settings,
    posted_card,
    press,
    script_ticket_flow,
)
from tests.scenarios.slack.conftest import TOKEN, Clock, dm, mention, posts, turn_finished

#: about 5,500 characters: two posted messages' worth
LONG = "\n\n".join(
    f"Paragraph {n}: " + "the ticket is still open and waiting. " * 14 for n in range(10)
)


def words(text: str) -> str:
    return " ".join(text.split())


def bot_messages(slack: FakeSlack, channel: str) -> list[dict[str, Any]]:
    return [m for m in slack.messages(channel) if m.get("user") == "UBOT"]


async def test_a_streamed_answer_shows_its_tool_call_as_a_task_and_ends_as_the_answer_once(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, fake_jira: FakeJira, clock: Clock
) -> None:
    bot = start_bot(**jira_settings(fake_jira), STREAM_ANSWERS="on")
    fake_jira.add_issue("TASK-123", "Printer on fire", status="In Progress")
    answer = (
        "**TASK-123** (_Printer on fire_) is In Progress; ask <!channel> [here](https://x.example)."
    )
    fake_openai.script(ToolUse("jira_get_issue", {"issue_key": "TASK-123"}, "call_1"), answer)
    ts = clock.ts()

    await bot.send(mention("C1", ts, "what is TASK-123?"))
    await fake_slack.wait_for(turn_finished("C1", ts))

    (stream,) = fake_slack.streams("C1")
    assert (stream["thread_ts"], stream["recipient_user_id"], stream["recipient_team_id"]) == (
        ts,
        "U1",
        "T1",
    )
    assert stream["task_display_mode"] == "timeline"
    tasks = [c for c in stream["chunks"] if c["type"] == "task_update"]
    assert [(t["id"], t["title"], t["status"]) for t in tasks] == [
        ("call_1", "Looking up TASK-123 in Jira", "in_progress"),
        ("call_1", "Looking up TASK-123 in Jira", "complete"),
    ]
    # the task came before the answer's text, and the text is escaped Markdown
    assert stream["chunks"].index(tasks[-1]) < max(
        i for i, c in enumerate(stream["chunks"]) if c["type"] == "markdown_text"
    )
    assert stream["text"] == (
        "**TASK-123** (_Printer on fire_) is In Progress; ask &lt;!channel&gt; "
        "[here](https://x.example)."
    )
    assert stream["streaming"] is False
    assert stream["metadata"]["event_payload"]["upto"] == len(answer)
    # the answer once: the streamed message is the only one of the bot's in the thread
    assert [m["ts"] for m in bot_messages(fake_slack, "C1")] == [stream["ts"]]
    assert posts(fake_slack, "C1") == []
    assert fake_openai.requests[-1].body.get("stream") is True
    statuses = [c.args["status"] for c in fake_slack.calls_to("assistant.threads.setStatus")]
    assert statuses == ["is thinking…", ""]


async def test_a_stream_refused_midway_ends_with_the_whole_answer_once_posted(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="on")
    fake_slack.refuse_stream_after = 1  # the stream takes one call, then Slack expires it
    fake_openai.script(ToolUse("get_current_time", {}, "call_t"), LONG)
    fake_openai.latency = 1.2  # the model thinks: the task's end goes out before the answer
    ts = clock.ts()

    await bot.send(mention("C1", ts, "what is going on?"))
    await fake_slack.wait_for(turn_finished("C1", ts))

    refused = [c for c in fake_slack.calls if c.method.endswith("Stream") and not c.ok]
    assert [c.error for c in refused] == ["message_not_in_streaming_state"]
    (stream,) = fake_slack.streams("C1")
    # the streamed message was taken over by the answer's first part, the rest posted after
    assert [m["text"] for m in bot_messages(fake_slack, "C1")] == format_answer(LONG)
    assert bot_messages(fake_slack, "C1")[0]["ts"] == stream["ts"]
    assert len(format_answer(LONG)) == 2


async def test_a_20000_character_answer_streams_and_goes_on_in_further_messages(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    # the rest as messages, however many (a long answer as a file: test_long_answers)
    bot = start_bot(STREAM_ANSWERS="on", LONG_ANSWER_MESSAGES="0")
    answer = "\n\n".join(
        f"Part {n}. " + "Every word of this answer matters. " * 16 for n in range(36)
    )
    assert 20_000 <= len(answer) <= 21_000
    fake_openai.script(answer)
    ts = clock.ts()

    await bot.send(mention("C1", ts, "tell me everything"))
    await fake_slack.wait_for(turn_finished("C1", ts), timeout=15)

    (stream,) = fake_slack.streams("C1")
    held = stream["metadata"]["event_payload"]["upto"]
    assert 5_000 < held < len(answer) and len(stream["text"]) <= 12_000
    rest = [p["text"] for p in posts(fake_slack, "C1")]
    assert all(len(text) <= 3_000 for text in rest)
    assert [m["text"] for m in bot_messages(fake_slack, "C1")] == [stream["text"], *rest]
    # every word once, in order, and nothing else
    assert words(stream["text"] + " " + " ".join(rest)) == words(answer)
    ids = [p["metadata"]["event_payload"]["post_id"] for p in posts(fake_slack, "C1")]
    assert ids == [
        f"{stream['metadata']['event_payload']['post_id'][:-2]}.{n}" for n in range(1, len(ids) + 1)
    ]


async def test_a_failed_turn_leaves_no_stream_behind(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="on")
    fake_openai.script(ToolUse("get_current_time", {}, "call_t"), Fail(400, "bad request"))
    ts = clock.ts()

    await bot.send(mention("C1", ts, "what time is it?"))
    await fake_slack.wait_for(turn_finished("C1", ts))

    (message,) = bot_messages(fake_slack, "C1")
    assert "chat.startStream" in [c.method for c in fake_slack.calls]
    assert message["ts"] not in [s["ts"] for s in fake_slack.streams("C1")]


async def test_a_direct_message_at_the_top_level_is_posted_with_live_steps(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    # Slack streams only replies in a thread; the top level of a DM keeps the posted answer
    bot = start_bot(STREAM_ANSWERS="on")
    fake_openai.script(ToolUse("get_current_time", {}, "call_t"), "It is noon.")
    ts = clock.ts()

    await bot.send(dm("D1", ts, "what time is it?"))
    await fake_slack.wait_for(turn_finished("D1", ts))

    assert fake_slack.streams("D1") == []
    assert [m["text"] for m in bot_messages(fake_slack, "D1")] == ["It is noon."]


async def test_streaming_off_keeps_the_posted_answer(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="off")
    fake_openai.script("All **good**.")
    ts = clock.ts()

    await bot.send(mention("C1", ts, "status?"))
    await fake_slack.wait_for(turn_finished("C1", ts))

    assert fake_slack.streams("C1") == []
    assert [m["text"] for m in bot_messages(fake_slack, "C1")] == ["All *good*."]
    assert fake_openai.requests[-1].body.get("stream") is not True


async def test_a_process_taking_over_posts_only_what_the_streamed_message_lacks(
    fake_slack: FakeSlack,
) -> None:
    # the first process streamed part of a long answer and died before posting the rest
    client = AsyncWebClient(token=TOKEN, base_url=fake_slack.api_url)
    thread = Thread("C1", fake_slack.add_message("C1", "tell me everything", user="U1"))
    answer = "\n\n".join(f"Part {n}. " + "Each word counts here. " * 20 for n in range(12))
    held = answer.index("Part 6.")
    streamer = await client.chat_stream(
        channel="C1", thread_ts=thread.thread_ts, recipient_user_id="U1", recipient_team_id="T1"
    )
    await streamer.append(markdown_text=answer[:held])
    payload = {"post_id": "turn-7-1.0", "upto": held}
    await streamer.stop(metadata={"event_type": "bot_post", "event_payload": payload})
    reply = Reply(answer, ok=True, outcome=Outcome.ANSWERED, turn_id=7, rounds=1)

    poster = Poster(client)
    for _ in range(2):  # the one taking over, and one more after it (nothing is left to do)
        await poster.answer(thread, reply, post_id="turn-7-1", look_first=True)

    shown = [m["text"] for m in bot_messages(fake_slack, "C1")]
    assert words(" ".join(shown)) == words(answer)
    assert len(posts(fake_slack, "C1")) == len(format_answer(answer[held:]))


async def test_a_thread_of_the_agent_dm_is_streamed_and_titled(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="on")
    fake_openai.script(ToolUse("crm_find_contacts", {"query": "Ana"}, "c1"), "Ana is at Acme.")
    ts = clock.ts()

    await bot.send(dm("D1", ts, "Look up Ana and summarise her account", thread_ts="1.000100"))
    await fake_slack.wait_for(turn_finished("D1", ts))

    (stream,) = fake_slack.streams("D1")
    assert (stream["thread_ts"], stream["text"]) == ("1.000100", "Ana is at Acme.")
    assert stream["tasks"]["c1"]["title"] == "Searching contacts for 'Ana'"
    assert stream["tasks"]["c1"]["status"] == "complete"
    assert fake_slack.thread_titles[("D1", "1.000100")] == "Look up Ana and summarise her account"
    statuses = [c.args for c in fake_slack.calls_to("assistant.threads.setStatus")]
    assert [(s["thread_ts"], s["status"]) for s in statuses] == [
        ("1.000100", "is thinking…"),
        ("1.000100", ""),
    ]


async def test_a_write_waiting_for_approval_leaves_its_card_and_streams_on_after_create(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, fake_jira: FakeJira, clock: Clock
) -> None:
    bot = start_bot(**jira_settings(fake_jira), STREAM_ANSWERS="on")
    script_ticket_flow(fake_openai)
    await bot.send(mention("C1", clock.ts(), "find Ana and open a ticket for her"))
    await fake_slack.wait_for(lambda s: posted_card(s, "C1") is not None)
    card = posted_card(fake_slack, "C1")
    assert card is not None

    # the search ran as a task of the stream, which goes once the card is up
    sent = [c for c in fake_slack.calls if c.method.endswith("Stream") and c.ok]
    tasks = [t for c in sent for t in c.args.get("chunks") or [] if t["type"] == "task_update"]
    assert [(t["id"], t["status"]) for t in tasks] == [("c1", "in_progress"), ("c1", "complete")]
    await fake_slack.wait_for(lambda s: [m["ts"] for m in bot_messages(s, "C1")] == [card["ts"]])

    assert await press(bot, "approve_write", card) == 200
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Done:")))
    await bot.idle()
    assert fake_jira.created == ["TASK-1"]
    assert len(answers(fake_slack, "C1", "is open for Ana")) == 1
    # the answer after Create is streamed too, for the person who asked
    (after,) = fake_slack.streams("C1")  # the first one went when the card came
    assert "is open for Ana" in after["text"]
    assert after["tasks"]["w1"]["status"] == "complete"
    assert (after["recipient_user_id"], after["recipient_team_id"]) == ("U1", "T1")


async def test_text_goes_out_as_the_model_writes_it_at_most_once_a_second(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="on")
    answer = "First the summary of the account. Then the contacts, one by one. Then the tickets."
    fake_openai.script(answer)
    fake_openai.frame_interval = 0.8  # four pieces over about three seconds
    ts = clock.ts()
    times = CallTimes()

    await bot.send(mention("C1", ts, "summarise the account"))
    while not turn_finished("C1", ts)(fake_slack):
        times.poll(fake_slack)
        await asyncio.sleep(0.01)
    times.poll(fake_slack)

    sent = [
        (t, c)
        for t, c in times.seen
        if c.method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
    ]
    texts = [
        chunk["text"]
        for _, c in sent
        for chunk in c.args.get("chunks") or []
        if chunk["type"] == "markdown_text"
    ]
    assert len([t for t in texts if t]) >= 3  # it grew while the model wrote
    assert "".join(texts) == answer
    assert all(b[0] - a[0] >= 0.95 for a, b in itertools.pairwise(sent[:-1]))
    assert not any(t.startswith(" ") for t in texts[1:])  # each piece starts with a word


async def test_a_rate_limited_stream_waits_and_shows_the_answer_once(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="on")
    fake_slack.rate_limit_next("chat.startStream", retry_after=1)
    fake_slack.rate_limit_next("chat.stopStream", retry_after=1)
    fake_openai.script(ToolUse("get_current_time", {}, "call_t"), "It is noon.")
    ts = clock.ts()

    await bot.send(mention("C1", ts, "what time is it?"))
    await fake_slack.wait_for(turn_finished("C1", ts), timeout=10)

    (stream,) = fake_slack.streams("C1")
    assert (stream["text"], stream["streaming"]) == ("It is noon.", False)
    assert stream["tasks"]["call_t"]["status"] == "complete"
    assert [m["ts"] for m in bot_messages(fake_slack, "C1")] == [stream["ts"]]


async def test_a_failed_tool_call_is_a_task_in_error_and_the_answer_follows(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="on")
    fake_openai.script(ToolUse("no_such_tool", {}, "bad"), "I could not look that up.")
    ts = clock.ts()

    await bot.send(mention("C1", ts, "look it up"))
    await fake_slack.wait_for(turn_finished("C1", ts))

    (stream,) = fake_slack.streams("C1")
    statuses = [c["status"] for c in stream["chunks"] if c["type"] == "task_update"]
    assert statuses == ["in_progress", "error"]
    assert stream["tasks"]["bad"]["title"] == "Running no_such_tool"
    assert stream["text"] == "I could not look that up."
