"""Slack behaviour 1, 2, 7, 8, 9: mentions and DMs are acked at once and answered in the right
place, with a working sign, mrkdwn, unfurls off, long answers split, failures as one plain line."""

from __future__ import annotations

import asyncio
import itertools
import re
import time

import pytest

from bot.agent.conversations import Conversations
from bot.slack.pacing import POST_INTERVAL_S
from bot.slack.worker import NAME_EVERY_S
from tests.fakes.openai_server import Fail, FakeOpenAI, Reply
from tests.fakes.slack_server import MAX_TEXT, FakeSlack
from tests.scenarios.slack.conftest import (
    BOT,
    Clock,
    Database,
    RunningBot,
    dm,
    mention,
    posts,
    turn_finished,
)


async def test_mention_is_answered_in_its_thread(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    fake_openai.script(Reply(text="Here is **bold** and a [link](https://example.com/x)."))
    ts = clock.ts()

    response = await bot.send(mention("C1", ts, "what is up?"))

    assert response.status_code == 200
    await fake_slack.wait_for(turn_finished("C1", ts))
    (add,) = fake_slack.calls_to("reactions.add")
    assert add.args == {"channel": "C1", "timestamp": ts, "name": "eyes"}
    (answer,) = posts(fake_slack)
    assert answer["thread_ts"] == ts
    assert answer["text"] == "Here is *bold* and a <https://example.com/x|link>."
    assert answer["unfurl_links"] is False and answer["unfurl_media"] is False
    # the bot's own mention is not part of what the model (and the history) got
    sent = fake_openai.requests[0].body["messages"][-1]
    assert sent == {"role": "user", "content": "what is up?"}
    stored = await db.history.messages("C1")
    assert [(m.role, m.content, m.slack_ts) for m in stored] == [
        ("user", "what is up?", ts),
        ("assistant", "Here is **bold** and a [link](https://example.com/x).", None),
    ]
    await bot.idle()
    assert await db.inbox.status("C1", ts) == "done"


async def test_a_mention_in_a_thread_is_answered_in_that_thread(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    parent, ts = clock.ts(), clock.ts()

    await bot.send(mention("C1", ts, thread_ts=parent))

    await fake_slack.wait_for(turn_finished("C1", ts))
    assert [p["thread_ts"] for p in posts(fake_slack)] == [parent]


async def test_direct_messages_are_answered_in_the_dm(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    top, parent, in_thread = clock.ts(), clock.ts(), clock.ts()

    await bot.send(dm("D1", top, "first"))
    await fake_slack.wait_for(turn_finished("D1", top))
    await bot.send(dm("D1", in_thread, "second", thread_ts=parent))
    await fake_slack.wait_for(turn_finished("D1", in_thread))

    first, second = posts(fake_slack, "D1")
    assert "thread_ts" not in first and first["text"] == "You said: first"
    assert second["thread_ts"] == parent and second["text"] == "You said: second"
    # one session per channel: the second turn's request carried the first turn
    stored = await db.history.messages("D1")
    assert [m.content for m in stored] == ["first", "You said: first", "second", "You said: second"]


async def test_the_working_sign_comes_before_a_slow_answer_and_the_ack_at_once(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    """A 60 s turn in small: the ack and the working sign do not wait for the model."""
    fake_openai.latency = 4.0
    ts = clock.ts()

    started = time.monotonic()
    response = await bot.send(mention("C1", ts))
    acked = time.monotonic() - started

    assert response.status_code == 200 and acked < 1.0
    await fake_slack.wait_for(lambda s: bool(s.calls_to("reactions.add")), timeout=1.0)
    assert time.monotonic() - started < 1.0 and not posts(fake_slack)
    await fake_slack.wait_for(turn_finished("C1", ts), timeout=15)
    assert len(posts(fake_slack)) == 1


async def test_a_long_answer_is_split_into_valid_messages_in_order(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    # split however long it is (a long answer as a file: test_long_answers)
    bot = start_bot(LONG_ANSWER_MESSAGES="0")
    paragraphs = [f"Paragraph {i}: " + "word " * 200 for i in range(1, 13)]
    fake_openai.script(Reply(text="\n\n".join(paragraphs)))
    ts = clock.ts()

    await bot.send(mention("C1", ts))

    await fake_slack.wait_for(turn_finished("C1", ts), timeout=20)
    sent = posts(fake_slack)
    assert len(sent) >= 3
    assert all(call.ok for call in fake_slack.calls_to("chat.postMessage"))
    assert all(len(p["text"]) < MAX_TEXT and p["thread_ts"] == ts for p in sent)
    numbers = [int(n) for p in sent for n in re.findall(r"Paragraph (\d+):", p["text"])]
    assert numbers == list(range(1, 13))
    # paced at Slack's one message a second per channel, so none is refused
    arrived = [c.at for c in fake_slack.calls_to("chat.postMessage")]
    assert min(b - a for a, b in itertools.pairwise(arrived)) >= 0.9 * POST_INTERVAL_S


async def test_a_failing_model_gets_one_short_plain_message(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    fake_openai.responder = lambda request: Fail(500)
    ts = clock.ts()

    await bot.send(mention("C1", ts, "are you there?"))

    await fake_slack.wait_for(turn_finished("C1", ts), timeout=20)
    (failure,) = posts(fake_slack)
    assert failure["thread_ts"] == ts
    text = failure["text"]
    assert len(text) < 300 and "\n" not in text
    for leak in ("Traceback", "Error:", "http://", "https://", "test-key", "xoxb-"):
        assert leak not in text
    stored = await db.history.messages("C1")
    assert [(m.role, m.content) for m in stored] == [("user", "are you there?")]
    (turn,) = await db.history.turns("C1")
    assert turn.outcome == "error"


async def test_a_rate_limited_post_is_retried_after_retry_after_and_posted_once(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    fake_slack.rate_limit_next("chat.postMessage", retry_after=1)
    ts = clock.ts()

    await bot.send(mention("C1", ts))

    await fake_slack.wait_for(turn_finished("C1", ts), timeout=10)
    statuses = [c.status for c in fake_slack.calls_to("chat.postMessage")]
    assert statuses == [429, 200]
    assert len(fake_slack.messages("C1")) == 1


async def test_a_slack_error_on_posting_keeps_the_turn_and_serves_others(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    fake_slack.fail_next("chat.postMessage", error="not_in_channel")
    lost, fine = clock.ts(), clock.ts()

    await bot.send(mention("C1", lost))
    await fake_slack.wait_for(turn_finished("C1", lost))
    await bot.send(mention("C2", fine))
    await fake_slack.wait_for(turn_finished("C2", fine))

    assert [c.error for c in fake_slack.calls_to("chat.postMessage")] == ["not_in_channel", None]
    assert len(await db.history.messages("C1")) == 2
    await bot.idle()
    assert await db.inbox.status("C1", lost) == "done"


async def test_the_bot_user_is_known_from_auth_test(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    ts = clock.ts()
    await bot.send(mention("C1", ts, f"and <@{BOT}> again"))
    await fake_slack.wait_for(lambda s: bool(posts(s)))
    assert posts(fake_slack)[0]["text"] == "You said: and again"
    assert len(fake_slack.calls_to("auth.test")) == 1


async def test_an_unexpected_error_after_the_ack_gets_one_plain_message(
    bot: RunningBot,
    fake_slack: FakeSlack,
    db: Database,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug with a secret: xoxb-test")

    monkeypatch.setattr(Conversations, "ask", broken)
    ts = clock.ts()

    await bot.send(mention("C1", ts))

    await fake_slack.wait_for(turn_finished("C1", ts))
    (failure,) = posts(fake_slack)
    assert "try again" in failure["text"] and "xoxb" not in failure["text"]
    await bot.idle()
    assert await db.inbox.status("C1", ts) == "failed"


async def test_the_channel_name_is_stored_for_the_admin_pages_once(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    """A channel's first answer -> its name from conversations.info, stored; asked once per
    process. A DM has no name to ask for."""
    fake_slack.channel_names["C1"] = "support"

    for channel in ("C1", "C1", "D1"):
        ts = clock.ts()
        await bot.send(mention(channel, ts))
        await fake_slack.wait_for(turn_finished(channel, ts))
    await bot.idle()

    async def names() -> dict[str, str | None]:
        return {s.channel_id: s.name for s in await db.history.list_sessions()}

    deadline = time.monotonic() + 5  # asked in the background, after the answer
    while (await names())["C1"] is None and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    assert [c.args["channel"] for c in fake_slack.calls_to("conversations.info")] == ["C1"]
    assert await names() == {"C1": "support", "D1": None}


async def test_channel_names_are_asked_at_slacks_pace(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    """conversations.info is a Tier 3 method (50 or so a minute): a burst of new channels
    is answered at once, and their names are asked one at a time, NAME_EVERY_S apart."""
    channels = ["C1", "C2", "C3"]
    sent = [(channel, clock.ts()) for channel in channels]
    for channel, ts in sent:
        await bot.send(mention(channel, ts))
    for channel, ts in sent:
        await fake_slack.wait_for(turn_finished(channel, ts))
    await fake_slack.wait_for(lambda s: len(s.calls_to("conversations.info")) == 3, timeout=10)

    asked = [c.at for c in fake_slack.calls_to("conversations.info")]
    assert all(b - a >= NAME_EVERY_S * 0.95 for a, b in itertools.pairwise(asked))
    assert [c.args["channel"] for c in fake_slack.calls_to("conversations.info")] == channels
