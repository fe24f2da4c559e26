"""The agent core end to end: Conversations over a real database and the real openai
client talking to the strict fake OpenAI server, in both API modes."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from bot.agent.conversations import Incoming
from bot.errors import ToolError
from bot.messages import Message, ToolCall
from bot.store.turns import TurnStore
from bot.tools.tool import tool
from bot.turn import TurnState
from tests.fakes.openai_server import Fail, FakeOpenAI, Reply, ToolUse
from tests.stored_turns import history

API_MODES = ["chat", "responses"]


def sent_messages(request) -> list[dict]:  # type: ignore[no-untyped-def]
    """The conversation a request carried, as neutral-ish dicts for assertions."""
    body = request.body
    if request.api == "chat":
        return body["messages"]
    return body["input"]


async def ask(services, text: str, channel: str = "C1", ts: str | None = None):  # type: ignore[no-untyped-def]
    """One turn as the shells run it: with the channel held (bot.jobs)."""
    async with services.jobs.hold(channel):
        return await services.conversations.ask(Incoming(channel, text, "U1", ts))


@pytest.mark.parametrize("api", API_MODES)
async def test_answer_without_tools(make_services, fake_openai: FakeOpenAI, api: str) -> None:
    services = make_services(LLM_API=api)
    fake_openai.script(Reply(text="Hello **there**."))

    reply = await ask(services, "hi")

    assert reply.ok and reply.text == "Hello **there**."
    stored = await history(services).messages("C1")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "hi"),
        ("assistant", "Hello **there**."),
    ]
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "answered" and turn.rounds == 0 and turn.api_mode == api
    assert turn.input_tokens > 0 and turn.output_tokens > 0 and turn.latency_ms is not None
    assert fake_openai.requests[0].api == api and fake_openai.requests[0].status == 200


@pytest.mark.parametrize("api", API_MODES)
async def test_one_tool_round(make_services, fake_openai: FakeOpenAI, api: str) -> None:
    services = make_services(LLM_API=api)
    fake_openai.script(
        Reply(tool_calls=[ToolUse("get_current_time", {"timezone": "Europe/Paris"}, "call_a")]),
        Reply(text="It is Monday."),
    )

    reply = await ask(services, "what day is it?")

    assert reply.text == "It is Monday."
    stored = await history(services).messages("C1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls[0].id == "call_a" and stored[1].content is None
    assert stored[2].tool_call_id == "call_a" and stored[2].name == "get_current_time"
    assert json.loads(stored[2].content)["timezone"] == "Europe/Paris"
    (turn,) = await history(services).turns("C1")
    assert turn.rounds == 1 and turn.tools_called == ["get_current_time"]
    assert len(fake_openai.requests) == 2
    assert all(r.status == 200 for r in fake_openai.requests)


@pytest.mark.parametrize("api", API_MODES)
async def test_two_sequential_tools(make_services, fake_openai: FakeOpenAI, api: str) -> None:
    services = make_services(LLM_API=api)
    fake_openai.script(
        ToolUse("get_current_time", {}, "call_1"),
        ToolUse("get_current_time", {"timezone": "Asia/Tokyo"}, "call_2"),
        Reply(text="Done."),
    )

    reply = await ask(services, "two steps")

    assert reply.ok
    stored = await history(services).messages("C1")
    middle = stored[1:-1]
    assert [m.role for m in middle] == ["assistant", "tool", "assistant", "tool"]
    assert [m.tool_calls[0].id for m in middle[::2]] == ["call_1", "call_2"]
    assert [m.tool_call_id for m in middle[1::2]] == ["call_1", "call_2"]
    assert all(r.status == 200 for r in fake_openai.requests)


@pytest.mark.parametrize("api", API_MODES)
async def test_parallel_calls_results_in_call_order(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    services = make_services(LLM_API=api)

    @tool
    async def slow_echo(word: str, delay: float) -> str:
        """Echo a word after a delay."""
        await asyncio.sleep(delay)
        return word

    services.registry.add(slow_echo)
    fake_openai.script(
        Reply(
            tool_calls=[
                ToolUse("slow_echo", {"word": "first", "delay": 0.3}, "c1"),
                ToolUse("slow_echo", {"word": "second", "delay": 0.0}, "c2"),
                ToolUse("slow_echo", {"word": "third", "delay": 0.1}, "c3"),
            ]
        ),
        Reply(text="ok"),
    )

    await ask(services, "three at once")

    stored = await history(services).messages("C1")
    results = [m for m in stored if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in results] == [
        ("c1", "first"),
        ("c2", "second"),
        ("c3", "third"),
    ]
    assert len(fake_openai.requests) == 2  # all three results in one follow-up request


@pytest.mark.parametrize("api", API_MODES)
async def test_failures_become_error_results(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    services = make_services(LLM_API=api, TOOL_TIMEOUT_S=0.2)

    @tool
    def broken(ticket: str) -> str:
        """Always fails."""
        raise ToolError(f"ticket {ticket} is locked")

    @tool
    def crashes() -> str:
        """Raises something unexpected."""
        raise RuntimeError("secret internals")

    @tool
    async def sleeps() -> str:
        """Never finishes in time."""
        await asyncio.sleep(5)
        return "late"

    for function in (broken, crashes, sleeps):
        services.registry.add(function)
    fake_openai.script(
        Reply(
            tool_calls=[
                ToolUse("broken", {"ticket": "T-1"}, "e1"),
                ToolUse("crashes", {}, "e2"),
                ToolUse("sleeps", {}, "e3"),
                ToolUse("no_such_tool", {}, "e4"),
                ToolUse("get_current_time", "{not json", "e5"),
                ToolUse("get_current_time", {"timezone": 42}, "e6"),
                ToolUse("broken", {}, "e7"),
            ]
        ),
        Reply(text="Some tools failed."),
    )

    reply = await ask(services, "break things")

    assert reply.ok and reply.outcome == "answered"
    errors = {
        m.tool_call_id: json.loads(m.content)["error"]
        for m in await history(services).messages("C1")
        if m.role == "tool"
    }
    assert errors["e1"] == "ticket T-1 is locked"
    assert "failed unexpectedly" in errors["e2"] and "secret" not in errors["e2"]
    assert "timed out" in errors["e3"]
    assert "Tool 'no_such_tool' not found" in errors["e4"]
    assert "not valid JSON" in errors["e5"]
    assert "Invalid arguments" in errors["e6"] and "timezone" in errors["e6"]
    assert "ticket" in errors["e7"] and "required" in errors["e7"].lower()
    # the model saw every error, paired with its call
    follow_up = json.dumps(fake_openai.requests[-1].body)
    assert "ticket T-1 is locked" in follow_up and fake_openai.requests[-1].status == 200


@pytest.mark.parametrize("api", API_MODES)
async def test_round_cap_forces_an_answer(
    make_services, fake_openai: FakeOpenAI, api: str, caplog
) -> None:
    services = make_services(LLM_API=api, MAX_TOOL_ROUNDS=2)
    fake_openai.responder = lambda request: (
        ToolUse("get_current_time", {}) if request.tool_names else Reply(text="Stopped here.")
    )

    with caplog.at_level(logging.WARNING):
        reply = await ask(services, "loop forever")

    assert reply.text == "Stopped here." and reply.outcome == "max_rounds"
    assert [bool(r.tool_names) for r in fake_openai.requests] == [True, True, False]
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "max_rounds" and turn.rounds == 2
    warning = next(r for r in caplog.records if "round cap" in r.getMessage())
    assert "2 rounds" in warning.getMessage() and "get_current_time" in warning.getMessage()


@pytest.mark.parametrize("api", API_MODES)
async def test_window_keeps_whole_recent_turns(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    # the window alone: summaries of what falls out are tests/scenarios/test_memory.py's
    services = make_services(LLM_API=api, HISTORY_TOKEN_BUDGET=400, HISTORY_SUMMARY="off")
    # ten earlier turns, each with a tool round, about 100 tokens a turn
    for n in range(10):
        fake_openai.script(ToolUse("get_current_time", {}, f"old{n}"), Reply(text=f"answer {n}"))
        await ask(services, f"question {n} " + "padding " * 40)
    fake_openai.reset()
    fake_openai.script(Reply(text="latest"))

    await ask(services, "newest question")

    request = fake_openai.requests[0]
    assert request.status == 200
    sent = json.dumps(sent_messages(request))
    assert "question 9" in sent and "question 0 " not in sent
    # the window starts at a whole turn: its user message, never a call or a result
    history = sent_messages(request)[1:] if api == "chat" else sent_messages(request)
    assert history[0].get("role") == "user" and history[0]["content"].startswith("question")
    kept = [m for m in history if str(m.get("content", "")).startswith("question")]
    assert 1 <= len(kept) < 10


@pytest.mark.parametrize("api", API_MODES)
async def test_orphaned_call_is_repaired_before_sending(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    services = make_services(LLM_API=api)
    turns = TurnStore(services.engines)
    # a crash after the model called a tool but before its result was stored
    record = TurnState(
        channel_id="C1", user_id="U1", messages=[Message.user("create it").with_(tokens=5)]
    )
    await turns.begin(record, 12_000)
    call = ToolCall("call_lost", "get_current_time", "{}")
    record.messages.append(Message.assistant(None, (call,)).with_(tokens=9))
    await turns.finish(record)
    # ...and a turn that never finished at all
    hello = Message.user("hello?").with_(tokens=5)
    await turns.begin(TurnState(channel_id="C1", messages=[hello]), 12_000)
    fake_openai.script(Reply(text="Back again."))

    reply = await ask(services, "are you there?")

    assert reply.ok, reply.text
    request = fake_openai.requests[0]
    assert request.status == 200  # the strict fake rejects an unanswered call
    sent = json.dumps(sent_messages(request))
    assert "call_lost" in sent and "interrupted" in sent
    outcomes = [t.outcome for t in await history(services).turns("C1")]
    assert outcomes == ["interrupted", "interrupted", "answered"]


@pytest.mark.parametrize(("first", "second"), [("chat", "responses"), ("responses", "chat")])
async def test_history_replays_in_the_other_mode(
    make_services, fake_openai: FakeOpenAI, first: str, second: str
) -> None:
    fake_openai.script(ToolUse("get_current_time", {}, "call_x"), Reply(text="noon"))
    await ask(make_services(LLM_API=first), "time?")
    fake_openai.reset()
    fake_openai.script(Reply(text="still noon"))

    reply = await ask(make_services(LLM_API=second), "and now?")

    assert reply.text == "still noon"
    request = fake_openai.requests[0]
    assert request.api == second and request.status == 200
    sent = sent_messages(request)
    if second == "responses":
        kinds = [item["role"] if item["type"] == "message" else item["type"] for item in sent]
        assert kinds == ["user", "function_call", "function_call_output", "assistant", "user"]
        assert sent[1]["call_id"] == sent[2]["call_id"] == "call_x"
    else:
        roles = [m["role"] for m in sent]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"] == "call_x"


@pytest.mark.parametrize("api", API_MODES)
async def test_failing_model_keeps_the_question(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    services = make_services(LLM_API=api)
    fake_openai.responder = lambda request: Fail(500, "upstream exploded at 10.0.0.7")

    reply = await ask(services, "anyone?")

    assert not reply.ok and reply.outcome == "error"
    assert reply.text == "The model server had an error. Please try again in a minute."
    assert len(fake_openai.requests) == 3  # the SDK's two retries, then we give up
    stored = await history(services).messages("C1")
    assert [(m.role, m.content) for m in stored] == [("user", "anyone?")]
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "error" and turn.error.startswith("server")


async def test_turns_in_one_channel_run_one_after_another(
    make_services, fake_openai: FakeOpenAI
) -> None:
    services = make_services()
    fake_openai.latency = 0.05
    fake_openai.responder = lambda request: Reply(
        text="re: " + request.body["messages"][-1]["content"]
    )

    replies = await asyncio.gather(
        *(ask(services, f"message {n}", ts=f"1700000000.00010{n}") for n in range(5))
    )

    assert all(r.ok for r in replies)
    stored = await history(services).messages("C1")
    assert [m.content for m in stored] == [
        text for n in range(5) for text in (f"message {n}", f"re: message {n}")
    ]
    # each request saw every earlier turn complete: nothing interleaved
    for n, request in enumerate(fake_openai.requests):
        assert len(request.body["messages"]) == 1 + 2 * n + 1


async def test_channels_do_not_share_history(make_services, fake_openai: FakeOpenAI) -> None:
    services = make_services()
    fake_openai.script(Reply(text="a"), Reply(text="b"))
    await ask(services, "secret of A", channel="CA")
    await ask(services, "question in B", channel="CB")
    assert "secret of A" not in json.dumps(fake_openai.requests[1].body)


def history_sent(request) -> list[tuple]:  # type: ignore[no-untyped-def]
    """A chat request's history as (role, user text or call ids or result's call id)."""
    shown = []
    for m in request.body["messages"][1:]:
        if m["role"] == "tool":
            shown.append(("tool", m["tool_call_id"]))
        elif m.get("tool_calls"):
            shown.append(("assistant", tuple(c["id"] for c in m["tool_calls"])))
        else:
            shown.append((m["role"], m["content"]))
    return shown


async def test_a_process_that_kept_the_window_sends_what_a_fresh_read_gives(
    make_services, fake_openai: FakeOpenAI
) -> None:
    # the process keeps each channel's window between turns; with old turns dropping out
    # of a small budget, what it sends must equal what a process reading afresh sends
    # the window alone, as each process reads or keeps it
    kept = make_services(
        HISTORY_TOKEN_BUDGET=300, RATE_LIMIT_PER_USER=0, HISTORY_SUMMARY="off"
    )  # 25 turns of U1
    for channel in ("CKEPT", "CFRESH"):
        for n in range(12):
            fake_openai.script(
                ToolUse("get_current_time", {}, f"call{n}"),
                Reply(text=f"answer {n} " + "words " * (n % 4) * 5),
            )
            await ask(kept, f"question {n} " + "padding " * (n % 3) * 10, channel=channel)
    fresh_reader = make_services(HISTORY_TOKEN_BUDGET=300, HISTORY_SUMMARY="off")
    fake_openai.reset()
    fake_openai.script(Reply(text="one"), Reply(text="two"))

    await ask(kept, "next", channel="CKEPT")
    await ask(fresh_reader, "next", channel="CFRESH")

    from_kept, from_fresh = (history_sent(r) for r in fake_openai.requests)
    assert from_kept == from_fresh
    assert from_kept[0] != ("user", "question 0 ") and from_kept[-1] == ("user", "next")
    assert 4 < len(from_kept) < 40


async def test_turns_stored_by_another_process_reach_the_model(
    make_services, fake_openai: FakeOpenAI
) -> None:
    first, second = make_services(), make_services()
    fake_openai.script(Reply(text="a1"), Reply(text="a2"), Reply(text="a3"), Reply(text="a4"))
    await ask(first, "q1")
    await ask(second, "q2")
    await ask(first, "q3")
    await ask(first, "q4")

    assert history_sent(fake_openai.requests[2]) == [
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
        ("user", "q3"),
    ]
    assert [c for _, c in history_sent(fake_openai.requests[3])] == [
        "q1",
        "a1",
        "q2",
        "a2",
        "q3",
        "a3",
        "q4",
    ]


@pytest.mark.parametrize("deleted_by", ["this process", "another process"])
async def test_a_deleted_message_leaves_the_window(
    make_services, fake_openai: FakeOpenAI, deleted_by: str
) -> None:
    services = make_services()
    deleter = services if deleted_by == "this process" else make_services()
    fake_openai.script(*(Reply(text=f"a{n}") for n in range(4)))
    await ask(services, "q1", ts="1700000000.000100")
    await ask(services, "q2", ts="1700000000.000200")
    await ask(services, "q3", ts="1700000000.000300")

    assert await deleter.conversations.delete("C1", "1700000000.000200") == (1, [])
    await ask(services, "q4", ts="1700000000.000400")

    assert [c for _, c in history_sent(fake_openai.requests[3])] == [
        "q1",
        "a0",
        "a1",
        "q3",
        "a2",
        "q4",
    ]


@pytest.mark.parametrize("edited_by", ["this process", "another process"])
async def test_an_edited_message_reaches_the_model_edited(
    make_services, fake_openai: FakeOpenAI, edited_by: str
) -> None:
    """The process that answered keeps the channel's window in memory: an edit stored by
    it or by another process is what the next request carries, cleaned as a new message."""
    services = make_services()
    editor = services if edited_by == "this process" else make_services()
    fake_openai.script(*(Reply(text=f"a{n}") for n in range(3)))
    await ask(services, "q1", ts="1700000000.000100")
    await ask(services, "q2", ts="1700000000.000200")

    edited = await editor.conversations.edit("C1", "1700000000.000100", "q1, edited\r\nnow")
    await ask(services, "q3", ts="1700000000.000300")

    assert edited == 1
    assert [c for _, c in history_sent(fake_openai.requests[2])] == [
        "q1, edited\nnow",
        "a0",
        "q2",
        "a1",
        "q3",
    ]
    stored = await history(services).messages("C1")
    assert stored[0].content == "q1, edited\nnow" and stored[0].slack_ts == "1700000000.000100"
    assert [m.edited_at is not None for m in stored] == [True] + [False] * 5
    # only a person's own message is edited, and only one that was stored
    assert await editor.conversations.edit("C1", "1700000000.000999", "never asked") == 0
