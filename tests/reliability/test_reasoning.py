"""A reasoning model keeps its reasoning between a turn's tool rounds (Responses API,
store=false): asked for with its encrypted content, sent back in place, never stored.

What the bot sends -> what the strict fake accepts (it refuses a reasoning item cut from
its call, a call sent by its id without its reasoning, changed encrypted content) -> what
the person reads and what is stored.
"""

from __future__ import annotations

import json
import logging

import pytest

from bot.agent.approval import APPROVAL
from bot.agent.conversations import Incoming
from bot.tools.tool import tool
from tests.fakes.openai_server import FakeOpenAI, Raw, Reply, Request, ToolUse
from tests.observers import Watching
from tests.stored_turns import history

ENCRYPTED = ["reasoning.encrypted_content"]


def thinking_call(call_id: str) -> Reply:
    return Reply(reasoning="check the clock", tool_calls=[ToolUse("get_current_time", {}, call_id)])


def kinds(request: Request) -> list[str]:
    return [item.get("type", "message") for item in request.body["input"]]


async def ask(services, text: str, *, streamed: bool = False):  # type: ignore[no-untyped-def]
    incoming = Incoming("C1", text, "U1", f"{len(text)}.1")
    return await services.conversations.ask(incoming, Watching(streamed=streamed))


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "streamed"])
async def test_reasoning_goes_back_in_place_between_tool_rounds(
    make_services, fake_openai: FakeOpenAI, streamed: bool
) -> None:
    services = make_services(LLM_API="responses")  # gpt-5-mini: a reasoning model
    fake_openai.script(
        thinking_call("call_1"), thinking_call("call_2"), Reply(reasoning="done", text="Noon.")
    )

    reply = await ask(services, "what time is it?", streamed=streamed)

    assert reply.ok and reply.text == "Noon."
    first, second, third = fake_openai.requests
    assert all(r.body["include"] == ENCRYPTED and r.body["store"] is False for r in (first, third))
    assert [r.status for r in fake_openai.requests] == [200, 200, 200]
    # each reasoning item right before the call it led to, with its id and encrypted content
    assert kinds(second) == ["message", "reasoning", "function_call", "function_call_output"]
    assert kinds(third) == [*kinds(second), "reasoning", "function_call", "function_call_output"]
    reasoning, call = second.body["input"][1:3]
    assert reasoning["encrypted_content"].startswith("gAAAA") and call["id"].startswith("fc_")
    assert third.body["input"][1:3] == [reasoning, call]
    # the history an admin reads holds the calls and results, not the reasoning
    stored = await history(services).messages("C1")
    assert [m.role for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    shown = json.dumps([m.to_dict() for m in stored])
    assert "gAAAA" not in shown and "rs_" not in shown and "reasoning" not in shown


async def test_a_later_turn_does_not_send_an_earlier_turns_reasoning(
    make_services, fake_openai: FakeOpenAI
) -> None:
    services = make_services(LLM_API="responses")
    fake_openai.script(thinking_call("call_1"), Reply(text="Noon."), Reply(text="Yes."))
    await ask(services, "what time is it?")

    reply = await ask(services, "sure?")

    assert reply.text == "Yes."
    later = fake_openai.requests[-1]
    assert later.status == 200 and "reasoning" not in kinds(later)
    assert all("id" not in item for item in later.body["input"])


async def test_a_turn_going_on_after_approval_sends_its_calls_without_ids(
    make_services, fake_openai: FakeOpenAI
) -> None:
    """The reasoning is not kept across a pause: the calls go back without their item
    ids, which the API takes without the reasoning."""
    services = make_services(LLM_API="responses")
    created: list[str] = []

    class Tickets:
        @tool(writes=True)
        def create_ticket(self, summary: str) -> dict[str, str]:
            """Create a ticket."""
            created.append(summary)
            return {"key": "TASK-1"}

    services.registry.add_object(Tickets())
    fake_openai.script(
        Reply(reasoning="a ticket", tool_calls=[ToolUse("create_ticket", {"summary": "x"}, "w1")]),
        Reply(text="Created TASK-1."),
    )
    paused = await ask(services, "open a ticket")  # WRITE_APPROVAL on: it waits

    reply = await services.conversations.resume(paused.turn_id, {"w1": APPROVAL})

    assert reply is not None and reply.text == "Created TASK-1." and created == ["x"]
    resumed = fake_openai.requests[-1]
    assert resumed.status == 200 and kinds(resumed) == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert "id" not in resumed.body["input"][1]


async def test_a_model_that_does_not_reason_is_asked_once_then_never_again(
    make_services, fake_openai: FakeOpenAI, caplog
) -> None:
    """gpt-4o refuses the include (400): the same request again without it, one INFO line;
    the process's later requests leave it out."""
    caplog.set_level(logging.INFO, logger="bot.llm.responses")
    services = make_services(LLM_API="responses", OPENAI_MODEL="gpt-4o")
    fake_openai.script(thinking_call("call_1"), Reply(text="Noon."), Reply(text="Yes."))

    assert (await ask(services, "what time is it?")).text == "Noon."
    assert (await ask(services, "sure?")).text == "Yes."

    refused, *rest = fake_openai.requests
    assert refused.status == 400 and refused.body["include"] == ENCRYPTED
    assert [r.status for r in rest] == [200, 200, 200]
    assert all("include" not in r.body for r in rest)
    (line,) = [r.getMessage() for r in caplog.records if "encrypted reasoning" in r.getMessage()]
    assert "gpt-4o" in line


async def test_chat_completions_mode_is_unaffected(make_services, fake_openai: FakeOpenAI) -> None:
    services = make_services(LLM_API="chat")
    fake_openai.script(thinking_call("call_1"), Reply(text="Noon."))

    assert (await ask(services, "what time is it?")).text == "Noon."

    assert all("include" not in r.body for r in fake_openai.requests)
    assert [m["role"] for m in fake_openai.requests[1].body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]


async def test_reasoning_without_encrypted_content_is_not_sent_back(
    make_services, fake_openai: FakeOpenAI
) -> None:
    """A server that gives reasoning without its encrypted content (it ignored the include):
    sending it back under store=false would be refused, so the calls go back bare."""
    services = make_services(LLM_API="responses")
    call = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_current_time",
        "arguments": "{}",
    }
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    fake_openai.script(Raw({"status": "completed", "output": [reasoning, call]}), "Noon.")

    assert (await ask(services, "what time is it?")).text == "Noon."

    after = fake_openai.requests[-1]
    assert after.status == 200 and kinds(after) == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert "id" not in after.body["input"][1]
