"""Model faults injected through the fake OpenAI server: what the user sees, what is stored.

Each case: the fault injected -> the reply the person gets -> what the database holds.
"""

from __future__ import annotations

import json
import time

import pytest

from bot.agent.approval import APPROVAL
from bot.agent.conversations import Incoming
from bot.tools.tool import tool
from tests.fakes.openai_server import Fail, FakeOpenAI, Hang, Reply, ToolUse
from tests.observers import Watching
from tests.stored_turns import history


async def ask(services, text="hi"):  # type: ignore[no-untyped-def]
    return await services.conversations.ask(Incoming("C1", text, "U1"))


async def test_rate_limited_then_answered(make_services, fake_openai: FakeOpenAI) -> None:
    """429 with Retry-After: 1 -> the SDK waits and retries -> one answer, one turn."""
    services = make_services()
    fake_openai.script(Fail(429, headers={"retry-after": "1"}), Reply(text="fine"))
    started = time.monotonic()
    reply = await ask(services)
    assert reply.text == "fine" and time.monotonic() - started >= 0.9
    assert [t.outcome for t in await history(services).turns("C1")] == ["answered"]


async def test_quota_exhausted_fails_fast(make_services, fake_openai: FakeOpenAI, caplog) -> None:
    """insufficient_quota -> a plain message to tell an admin; no endless retrying."""
    services = make_services()
    fake_openai.responder = lambda r: Fail(
        429, code="insufficient_quota", type="insufficient_quota"
    )
    reply = await ask(services)
    assert reply.text == "The bot's model quota is used up. Please tell an admin."
    assert len(fake_openai.requests) <= 3
    assert any("quota" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")


async def test_hung_model_times_out_and_says_so(make_services, fake_openai: FakeOpenAI) -> None:
    """A server that never answers -> MODEL_TIMEOUT_S per call -> the user is told."""
    services = make_services(MODEL_TIMEOUT_S=0.5)
    fake_openai.responder = lambda r: Hang(30)
    started = time.monotonic()
    reply = await ask(services)
    assert not reply.ok and reply.text == "The model did not answer in time."
    assert time.monotonic() - started < 5  # three attempts of 0.5 s plus back-off
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "error" and turn.error.startswith("timeout")
    assert [m.role for m in await history(services).messages("C1")] == ["user"]


async def test_turn_deadline_bounds_a_slow_tool_loop(
    make_services, fake_openai: FakeOpenAI
) -> None:
    """Every answer slow but in time -> the per-turn deadline stops the turn."""
    services = make_services(TURN_DEADLINE_S=1.0)
    fake_openai.latency = 0.4
    fake_openai.responder = lambda r: ToolUse("get_current_time", {})
    reply = await ask(services)
    assert not reply.ok and "took too long" in reply.text
    # the rounds that completed are kept, each call with its result
    stored = await history(services).messages("C1")
    assert stored[0].role == "user" and len(stored) % 2 == 1
    assert [m.role for m in stored[1:]] == ["assistant", "tool"] * ((len(stored) - 1) // 2)


async def test_context_too_long_is_retried_with_less_history(
    make_services, fake_openai: FakeOpenAI
) -> None:
    """context_length_exceeded -> trimmed and retried once -> answered."""
    services = make_services(HISTORY_TOKEN_BUDGET=2000)
    for n in range(8):
        fake_openai.script(Reply(text=f"answer {n}"))
        await ask(services, f"question {n} " + "words " * 100)
    fake_openai.reset()
    fake_openai.script(Fail(400, code="context_length_exceeded"), Reply(text="shorter"))

    reply = await ask(services, "again")

    assert reply.text == "shorter"
    first, second = fake_openai.requests
    assert len(second.body["messages"]) < len(first.body["messages"])


def _sent(request) -> list:  # type: ignore[no-untyped-def]
    """The conversation a request sent, in either API mode."""
    return request.body.get("messages") or request.body["input"]


async def _long_history(services, fake_openai: FakeOpenAI) -> None:  # type: ignore[no-untyped-def]
    for n in range(8):
        fake_openai.script(Reply(text=f"answer {n}"))
        await ask(services, f"question {n} " + "words " * 100)
    fake_openai.reset()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_context_too_long_after_a_tool_round_trims_history_and_goes_on(
    make_services, fake_openai: FakeOpenAI, caplog, api: str
) -> None:
    """A tool round, then context_length_exceeded -> the oldest history leaves the request,
    the question and the round stay, the tool does not run again -> answered; one log line;
    nothing stored is lost."""
    services = make_services(LLM_API=api, HISTORY_TOKEN_BUDGET=2000)
    await _long_history(services, fake_openai)
    fake_openai.script(
        ToolUse("get_current_time", {}),
        Fail(400, code="context_length_exceeded"),
        Reply(text="It is noon."),
    )

    reply = await ask(services, "what time is it?")

    assert reply.ok and reply.text == "It is noon."
    _, too_long, retried = fake_openai.requests
    assert too_long.status == 400 and retried.status == 200
    assert len(_sent(retried)) < len(_sent(too_long))
    # the question and this turn's round, exactly as before, end the shorter request
    assert _sent(retried)[-3:] == _sent(too_long)[-3:]
    assert "what time is it?" in json.dumps(_sent(retried)[-3])
    (line,) = [r.getMessage() for r in caplog.records if "context length" in r.getMessage()]
    assert "round 2" in line and "history messages" in line
    stored = await history(services).messages("C1")
    assert len(stored) == 16 + 4 and [m.role for m in stored[-3:]] == [
        "assistant",
        "tool",
        "assistant",
    ]
    assert (await history(services).turns("C1"))[-1].outcome == "answered"


async def test_context_too_long_when_an_approved_turn_goes_on_trims_its_history(
    make_services, fake_openai: FakeOpenAI
) -> None:
    """A turn paused for approval, approved, then too long -> its older history leaves the
    request, its question and its approved round stay -> answered, the write ran once."""
    services = make_services(HISTORY_TOKEN_BUDGET=2000)
    await _long_history(services, fake_openai)
    created: list[str] = []

    class Tickets:
        @tool(writes=True)
        def create_ticket(self, summary: str) -> dict[str, str]:
            """Create a ticket."""
            created.append(summary)
            return {"key": "TASK-1"}

    services.registry.add_object(Tickets())
    fake_openai.script(
        ToolUse("create_ticket", {"summary": "x"}, "w1"),
        Fail(400, code="context_length_exceeded"),
        Reply(text="Created TASK-1."),
    )
    paused = await services.conversations.ask(Incoming("C1", "open a ticket", "U1"), Watching())

    reply = await services.conversations.resume(paused.turn_id, {"w1": APPROVAL})

    assert reply is not None and reply.text == "Created TASK-1." and created == ["x"]
    _, too_long, retried = fake_openai.requests
    assert len(_sent(retried)) < len(_sent(too_long))
    assert _sent(retried)[-3:] == _sent(too_long)[-3:]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_context_still_too_long_after_the_trim_ends_the_turn_plainly(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    """Too long again after the one trim -> the plain short message; the round that ran is
    kept, the question too; no third try."""
    services = make_services(LLM_API=api, HISTORY_TOKEN_BUDGET=2000)
    await _long_history(services, fake_openai)
    fake_openai.script(
        ToolUse("get_current_time", {}),
        Fail(400, code="context_length_exceeded"),
        Fail(400, code="context_length_exceeded"),
    )

    reply = await ask(services, "what time is it?")

    assert not reply.ok and reply.text == "The conversation is too long for the model."
    assert len(fake_openai.requests) == 3
    turn = (await history(services).turns("C1"))[-1]
    assert turn.outcome == "error" and turn.error.startswith("context_length")
    stored = await history(services).messages("C1")
    assert [m.role for m in stored[-3:]] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_cut_off_answer_is_marked(make_services, fake_openai: FakeOpenAI, api: str) -> None:
    """finish_reason length / status incomplete -> shown with a note, turn 'truncated'."""
    services = make_services(LLM_API=api)
    fake_openai.script(Reply(text="The first half of", finish_reason="length"))
    reply = await ask(services)
    assert reply.text.startswith("The first half of") and "cut off" in reply.text
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "truncated"


async def test_content_filter_gets_a_polite_answer(make_services, fake_openai: FakeOpenAI) -> None:
    services = make_services()
    fake_openai.script(Reply(text="", finish_reason="content_filter"))
    reply = await ask(services)
    assert reply.text == "I can't help with that request."
    assert len(fake_openai.requests) == 1
