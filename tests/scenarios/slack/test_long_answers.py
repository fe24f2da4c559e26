"""Long answers (LONG_ANSWER_MESSAGES, default 3): an answer that would take more messages
than that is posted as its first part, and the whole of it as a Markdown file in the
thread; streamed, the stream holds the first part. A refused upload falls back to the split
posts, and a shorter answer posts no file."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.conversations import Reply
from bot.messages import Outcome
from bot.slack.answer_file import FILE_NAME, NOTE
from bot.slack.cards import FEEDBACK
from bot.slack.events import Thread
from bot.slack.format import format_answer
from bot.slack.poster import Poster
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import MAX_TEXT, FakeSlack
from tests.scenarios.slack.conftest import (
    BOT,
    TOKEN,
    Clock,
    Database,
    RunningBot,
    mention,
    turn_finished,
)

#: about 200 KB of Markdown, in numbered paragraphs
PARAGRAPHS = [f"Paragraph {n}: " + "every word of this answer matters. " * 40 for n in range(143)]
LONG = "\n\n".join(PARAGRAPHS)


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"Paragraph (\d+):", text)]


async def answered(
    bot: RunningBot, slack: FakeSlack, model: FakeOpenAI, clock: Clock, answer: str
) -> tuple[str, list[dict[str, Any]]]:
    """Mention the bot in C1, the model answering ``answer``: the thread's ts, and the bot's
    messages in it once the turn is over (posts, the stream, the file's message)."""
    model.script(answer)
    ts = clock.ts()
    await bot.send(mention("C1", ts, "tell me everything"))
    await slack.wait_for(turn_finished("C1", ts), timeout=40)
    return ts, [m for m in slack.thread("C1", ts) if m.get("user") == BOT]


async def test_a_200_kb_answer_is_its_first_part_and_the_whole_of_it_as_a_file(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    assert 190_000 <= len(LONG) <= 210_000
    bot = start_bot()

    ts, shown = await answered(bot, fake_slack, fake_openai, clock, LONG)

    # the first part (one message), then the file with the line that says what it is
    first, shared = shown
    assert numbers(first["text"])[0] == 0 and len(first["text"]) <= MAX_TEXT
    assert not first.get("files") and shared["files"][0]["name"] == FILE_NAME
    assert shared["text"] == NOTE and shared["ts"] > first["ts"]
    (upload,) = fake_slack.uploaded_files
    assert (upload["name"], upload["channel"], upload["thread_ts"]) == (FILE_NAME, "C1", ts)
    assert numbers(upload["content"].decode()) == list(range(len(PARAGRAPHS)))
    assert upload["content"].decode() == LONG
    # the feedback buttons are under the first part
    section, buttons = first["blocks"]
    assert section["text"]["text"] == first["text"]
    assert buttons["elements"][0]["action_id"] == FEEDBACK
    # the stored history keeps the whole answer
    stored = await db.history.messages("C1")
    assert [m.content for m in stored if m.role == "assistant"] == [LONG]


async def test_a_streamed_200_kb_answer_ends_its_stream_and_goes_on_in_a_file(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(STREAM_ANSWERS="on")

    ts, (streamed, shared) = await answered(bot, fake_slack, fake_openai, clock, LONG)

    (stream,) = fake_slack.streams("C1")
    assert numbers(stream["text"])[0] == 0
    assert streamed["ts"] == stream["ts"] and not streamed.get("files")
    assert shared["files"][0]["name"] == FILE_NAME and shared["text"] == NOTE
    (upload,) = fake_slack.uploaded_files
    assert upload["thread_ts"] == ts
    assert numbers(upload["content"].decode()) == list(range(len(PARAGRAPHS)))
    assert fake_slack.calls_to("chat.postMessage") == []


@pytest.mark.parametrize(
    "refuse",
    [
        lambda slack: slack.fail_next("files.getUploadURLExternal", "not_allowed_token_type"),
        lambda slack: slack.fail_upload_next(503),
        lambda slack: slack.fail_next("files.completeUploadExternal", "missing_scope"),
    ],
    ids=["url-refused", "upload-refused", "complete-refused"],
)
async def test_a_refused_upload_posts_the_answer_split_as_before(
    start_bot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
    refuse: Any,
) -> None:
    # 10 paragraphs: five messages (200 KB posted one message a second would take a minute)
    answer = "\n\n".join(PARAGRAPHS[:10])
    refuse(fake_slack)
    bot = start_bot()

    with caplog.at_level(logging.WARNING, logger="bot.slack"):
        _, shown = await answered(bot, fake_slack, fake_openai, clock, answer)

    assert fake_slack.uploaded_files == [] and not any(m.get("files") for m in shown)
    assert len(shown) > 4
    assert numbers(" ".join(m["text"] for m in shown)) == list(range(10))
    warnings = [r for r in caplog.records if "as a file" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


async def test_an_answer_within_the_limit_posts_no_file(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    # five paragraphs: three messages, within LONG_ANSWER_MESSAGES=3
    answer = "\n\n".join(PARAGRAPHS[:5])
    bot = start_bot()

    _, shown = await answered(bot, fake_slack, fake_openai, clock, answer)

    assert 2 <= len(shown) <= 3
    assert fake_slack.uploaded_files == []
    assert fake_slack.calls_to("files.getUploadURLExternal") == []
    assert numbers(" ".join(m["text"] for m in shown)) == list(range(5))


async def test_no_limit_posts_every_long_answer_as_messages(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    answer = "\n\n".join(PARAGRAPHS[:12])
    bot = start_bot(LONG_ANSWER_MESSAGES="0")

    _, shown = await answered(bot, fake_slack, fake_openai, clock, answer)

    assert fake_slack.uploaded_files == []
    assert numbers(" ".join(m["text"] for m in shown)) == list(range(12))


async def test_a_process_taking_over_attaches_the_file_once_after_the_first_part(
    fake_slack: FakeSlack,
) -> None:
    # the first process posted the answer's first part and died before the upload
    client = AsyncWebClient(token=TOKEN, base_url=fake_slack.api_url)
    thread = Thread("C1", fake_slack.add_message("C1", "tell me everything", user="U1"))
    metadata = {"event_type": "bot_post", "event_payload": {"post_id": "turn-7-1.0"}}
    first = format_answer(LONG)[0]
    await client.chat_postMessage(
        channel="C1", thread_ts=thread.thread_ts, text=first, metadata=metadata
    )
    reply = Reply(LONG, ok=True, outcome=Outcome.ANSWERED, turn_id=7, rounds=1)

    poster = Poster(client, long_answer_messages=3)
    await poster.answer(thread, reply, post_id="turn-7-1", look_first=True)

    assert len(fake_slack.calls_to("chat.postMessage")) == 1
    (upload,) = fake_slack.uploaded_files
    assert upload["content"].decode() == LONG and upload["thread_ts"] == thread.thread_ts
