"""Limits on what one person or a crowd can make the bot spend: turns per person, model
requests in flight, and the tokens of one reply. A refused question gets a polite reply in
its thread and is kept; the next one that fits the limits is answered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, Request
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, Database, RunningBot, echo, mention, posts


def said(slack: FakeSlack, channel: str, needle: str) -> Callable[[FakeSlack], bool]:
    return lambda s: any(needle in p["text"] for p in posts(s, channel))


async def test_one_person_past_the_limit_is_asked_to_wait_and_the_question_is_kept(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
    db: Database,
) -> None:
    bot = start_bot(RATE_LIMIT_PER_USER=2)
    for n in (1, 2):
        await bot.send(mention("C1", clock.ts(), f"question {n}"))
        await fake_slack.wait_for(said(fake_slack, "C1", f"You said: question {n}"))
    asked = len(fake_openai.requests)

    third = clock.ts()
    assert (await bot.send(mention("C1", third, "question 3"))).status_code == 200
    await fake_slack.wait_for(said(fake_slack, "C1", "questions in the last 10 minutes"))
    await bot.idle()

    (polite,) = [p for p in posts(fake_slack, "C1") if "10 minutes" in p["text"]]
    assert polite["thread_ts"] == third
    assert "You have asked me 2 questions" in polite["text"]
    assert "ask again in about 10 minutes" in polite["text"]
    assert len(fake_openai.requests) == asked  # the model was not asked
    # kept: in the history, and the next request (someone else's) carries it
    assert "question 3" in [m.content for m in await db.history.messages("C1")]
    await bot.send(mention("C1", clock.ts(), "hello", user="U2"))
    await fake_slack.wait_for(said(fake_slack, "C1", "You said: hello"))
    sent = [m.get("content") for m in fake_openai.requests[-1].body["messages"]]
    assert "question 3" in sent


async def test_a_full_house_of_model_requests_asks_newcomers_to_come_back(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
    db: Database,
) -> None:
    async def slow_for_c1(request: Request) -> Reply:
        if "slowly" in str(request.body["messages"][-1].get("content")):
            await asyncio.sleep(4)
        return echo(request)

    fake_openai.responder = slow_for_c1
    bot = start_bot(MAX_CONCURRENT_TURNS=1)
    await bot.send(mention("C1", clock.ts(), "answer slowly"))
    await fake_slack.wait_for(lambda s: len(fake_openai.requests) == 1)

    await bot.send(mention("C2", clock.ts(), "me too"))
    await fake_slack.wait_for(said(fake_slack, "C2", "too many questions at once"))
    (busy,) = posts(fake_slack, "C2")
    assert "Please ask again in a minute" in busy["text"]
    assert "me too" in [m.content for m in await db.history.messages("C2")]

    # the slow one was not cut short, and once it is done the next question is answered
    await fake_slack.wait_for(said(fake_slack, "C1", "You said: answer slowly"), timeout=15)
    await bot.send(mention("C2", clock.ts(), "now?"))
    await fake_slack.wait_for(said(fake_slack, "C2", "You said: now?"))


@pytest.mark.parametrize(
    ("api", "field"), [("chat", "max_completion_tokens"), ("responses", "max_output_tokens")]
)
async def test_max_output_tokens_goes_with_every_model_request(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
    api: str,
    field: str,
) -> None:
    bot = start_bot(LLM_API=api, MAX_OUTPUT_TOKENS=321)
    await bot.send(mention("C1", clock.ts(), "hi"))
    await fake_slack.wait_for(lambda s: len(posts(s, "C1")) == 1)

    (request,) = fake_openai.requests
    assert request.body[field] == 321
    assert "max_tokens" not in request.body
