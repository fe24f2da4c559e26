"""A Slack mention (the bot's app against the fake Slack) answered by a real llama-server in
both API modes: the answer streamed into the thread as the server writes it, and /metrics
counting the tokens the server reported."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.agent.loop import EMPTY_ANSWER
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, Database, RunningBot, mention, turn_finished
from tests.scenarios.slack.test_metrics import TOKEN, scrape, value
from tests.smoke.llama import SMOKE, LlamaServer

pytestmark = SMOKE

API_MODES = ["chat", "responses"]
#: a turn of the tiny model, the bot's tools in its prompt, on a busy machine
TURN_S = 180


async def answered(bot: RunningBot, slack: FakeSlack, clock: Clock, channel: str) -> None:
    """A mention in ``channel``, and its turn over (answer posted or streamed)."""
    ts = clock.ts()
    await bot.send(mention(channel, ts, "Say hello in one short sentence."))
    await slack.wait_for(turn_finished(channel, ts), timeout=TURN_S)
    await bot.idle()


@pytest.fixture(params=API_MODES)
def bot(
    request: pytest.FixtureRequest,
    start_bot: Callable[..., RunningBot],
    llama_server: LlamaServer,
) -> RunningBot:
    """The app with the llama-server as its model, in each API mode, streaming answers."""
    return start_bot(
        **llama_server.settings(LLM_API=request.param, MAX_OUTPUT_TOKENS="96"),
        STREAM_ANSWERS="on",
        METRICS_TOKEN=TOKEN,
    )


async def test_a_mention_is_answered_in_a_stream_of_the_servers_text(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, db: Database, clock: Clock
) -> None:
    await answered(bot, fake_slack, clock, "C1")

    (stream,) = fake_slack.streams("C1")
    assert stream["streaming"] is False and stream["text"].strip()
    (turn,) = await db.history.turns("C1")
    assert turn.outcome in {"answered", "truncated"}, turn.error
    *_, answer = await db.history.messages("C1")
    # the stream carried the whole answer the server wrote, and it was stored
    assert answer.role == "assistant" and answer.content not in {None, "", EMPTY_ANSWER}
    assert stream["metadata"]["event_payload"]["upto"] == len(answer.content)
    assert fake_openai.requests == []  # the real server answered, not the fake


async def test_metrics_count_the_tokens_the_server_reported(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    before = await scrape(bot)

    await answered(bot, fake_slack, clock, "C1")

    after = await scrape(bot)
    (turn,) = await db.history.turns("C1")
    assert turn.input_tokens > 0 and turn.output_tokens > 0
    for kind, tokens in (("input", turn.input_tokens), ("output", turn.output_tokens)):
        counted = value(after, "bot_tokens_total", kind=kind)
        assert counted - value(before, "bot_tokens_total", kind=kind) == tokens
    assert (
        value(after, "bot_model_requests_total", status="ok")
        - value(before, "bot_model_requests_total", status="ok")
        == 1
    )
