"""A channel holding a 1.3 MB answer, through the real OpenAI client to the strict fake,
whose model refuses a request past its context (``context_length_exceeded``) as a real one
does.

Each case: the history -> the summary requests the next turns make (how many, how large)
-> what the person reads."""

from __future__ import annotations

import json
import logging

from bot.agent.conversations import Incoming
from tests.fakes.openai_server import Fail, FakeOpenAI, Reply, Request

#: what the fake model takes at most, in characters of request body (about 100k tokens)
MODEL_TAKES = 400_000
HUGE = "All the log lines you asked for:\n" + "2026-12-03 12:00:00 ERROR timeout\n" * 38_500


def too_long() -> Fail:
    return Fail(400, code="context_length_exceeded")


def summaries(fake: FakeOpenAI) -> list[Request]:
    """The summary requests (a turn's request offers tools; a summary request none)."""
    return [r for r in fake.requests if not r.tool_names]


async def turns(services, count: int) -> list[str]:  # type: ignore[no-untyped-def]
    """The huge answer, then ``count`` more turns; what each of those turns answered."""
    await services.conversations.ask(Incoming("CH", "show me every log line", "U1"))
    said = []
    for n in range(count):
        reply = await services.conversations.ask(Incoming("CH", f"question {n}", "U1"))
        said.append(reply.text)
    return said


async def test_a_huge_answer_costs_one_bounded_summary_request(
    make_services, fake_openai: FakeOpenAI
) -> None:
    """A 1.3 MB answer in the history; HISTORY_TOKEN_BUDGET 2000 -> the next turn's summary
    request carries the answer's head and tail with a note of what was cut (a few kB, which
    the model takes) -> one summary request in five turns, every turn answered."""
    services = make_services(HISTORY_TOKEN_BUDGET=2000)
    assert len(HUGE) > 1_300_000

    def model(request: Request) -> Fail | Reply:
        if len(json.dumps(request.body)) > MODEL_TAKES:
            return too_long()
        if request.tool_names:
            return Reply(text=HUGE if not fake_openai.requests[:-1] else "ok")
        return Reply(text="Summary: the bot showed a long log of timeouts.")

    fake_openai.responder = model
    said = await turns(services, 5)

    assert said == ["ok"] * 5
    (summary,) = summaries(fake_openai)
    assert summary.status == 200 and len(json.dumps(summary.body)) < 20_000
    assert "characters cut" in json.dumps(summary.body)
    assert all(r.status == 200 for r in fake_openai.requests)


async def test_a_summary_refused_as_too_long_is_not_asked_again_at_every_turn(
    make_services, fake_openai: FakeOpenAI, caplog
) -> None:
    """A model that refuses every summary request as too long -> the first turn past the
    budget asks once, then once more with every message cut harder, then leaves those
    messages out of the summary (one warning) -> no turn after asks for them again; every
    turn is answered."""
    services = make_services(HISTORY_TOKEN_BUDGET=2000)

    def model(request: Request) -> Fail | Reply:
        if not request.tool_names:
            return too_long()
        return Reply(text=HUGE if not fake_openai.requests[:-1] else "ok")

    fake_openai.responder = model
    with caplog.at_level(logging.WARNING, logger="bot.agent.memory"):
        said = await turns(services, 5)

    assert said == ["ok"] * 5
    first, harder = summaries(fake_openai)
    assert first.status == harder.status == 400
    assert len(json.dumps(harder.body)) < len(json.dumps(first.body)) < 20_000
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "bot.agent.memory"]
    assert warning.startswith("summary of CH refused as too long for messages ")
