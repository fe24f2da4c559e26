"""What the model server is sent and what becomes of replies the bot cannot read, in both
API modes, streamed and not.

The server (or its settings) -> what the person reads and the log says -> what is stored.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bot.agent.conversations import Incoming
from tests.fakes.openai_server import FakeOpenAI, Raw, Reply, ToolUse
from tests.observers import Watching
from tests.stored_turns import history

BAD_REPLY = (
    "The model server sent a reply the bot cannot read. Please try again; if it keeps "
    "happening, tell an admin."
)


async def ask(services, text: str = "hi", *, streamed: bool = False):  # type: ignore[no-untyped-def]
    observer = Watching(streamed=streamed)
    reply = await services.conversations.ask(Incoming("C1", text, "U1"), observer)
    return reply, "".join(observer.text)


CHAT_BODIES = {
    "no choices": {"id": "chatcmpl-1", "object": "chat.completion"},
    "empty choices": {"choices": []},
    "not an object": ["choices"],
    "message is text": {"choices": [{"message": "hello", "finish_reason": "stop"}]},
    "content is a number": {"choices": [{"message": {"role": "assistant", "content": 5}}]},
    "call without id": {
        "choices": [{"message": {"tool_calls": [{"type": "function", "function": {"name": "x"}}]}}]
    },
}
RESPONSES_BODIES = {
    "no output": {"id": "resp_1", "object": "response", "status": "completed"},
    "output is text": {"output": "hello"},
    "text part without text": {
        "output": [{"type": "message", "content": [{"type": "output_text"}]}]
    },
    "call without call_id": {"output": [{"type": "function_call", "name": "x"}]},
}


@pytest.mark.parametrize(
    ("api", "body"),
    [("chat", b) for b in CHAT_BODIES.values()]
    + [("responses", b) for b in RESPONSES_BODIES.values()],
    ids=[f"chat: {k}" for k in CHAT_BODIES] + [f"responses: {k}" for k in RESPONSES_BODIES],
)
async def test_an_unreadable_reply_is_a_plain_error(
    make_services, fake_openai: FakeOpenAI, caplog, api: str, body: Any
) -> None:
    """HTTP 200 with a body that is not what the API promises -> one plain message and an
    error log line saying what was wrong -> the turn is an error of kind bad_reply."""
    services = make_services(LLM_API=api)
    fake_openai.script(Raw(body))

    reply, _ = await ask(services)

    assert not reply.ok and reply.text == BAD_REPLY
    (line,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "reply could not be read" in line.getMessage() and f"LLM_API={api}" in line.getMessage()
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "error" and turn.error.startswith("bad_reply")


STREAMS = {
    ("chat", "chunk without delta"): ({"choices": [{"index": 0}]},),
    ("chat", "not JSON"): ("{not json",),
    ("chat", "delta is text"): ({"choices": [{"index": 0, "delta": "hi"}]},),
    ("responses", "never completed"): ({"type": "response.output_text.delta", "delta": "Hi"},),
    ("responses", "completed without a response"): ({"type": "response.completed"},),
    ("responses", "no type"): ({"delta": "Hi"},),
}


@pytest.mark.parametrize(
    ("api", "events"),
    [(a, e) for (a, _), e in STREAMS.items()],
    ids=[f"{a}: {what}" for a, what in STREAMS],
)
async def test_an_unreadable_stream_is_a_plain_error(
    make_services, fake_openai: FakeOpenAI, api: str, events: tuple[Any, ...]
) -> None:
    services = make_services(LLM_API=api)
    fake_openai.script(Raw(events=events))

    reply, _ = await ask(services, streamed=True)

    assert not reply.ok and reply.text == BAD_REPLY
    assert fake_openai.requests[-1].stream


async def test_an_unknown_item_is_not_mistaken_for_a_missing_api(
    make_services, fake_openai: FakeOpenAI
) -> None:
    """A 404 naming an input item (the Responses API has it, the item is not stored) is a
    bad request, not a server without /responses."""
    from tests.fakes.openai_server import Fail

    services = make_services(LLM_API="responses")
    message = "Item with id 'rs_1' not found. Items are not persisted when `store` is false."
    fake_openai.script(Fail(404, message=message, param="input"))
    reply, _ = await ask(services)
    assert not reply.ok and "LLM_API" not in reply.text
    (turn,) = await history(services).turns("C1")
    assert turn.error.startswith("bad_request")


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_streamed_text_and_tool_calls_are_read(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    services = make_services(LLM_API=api)
    fake_openai.script(ToolUse("get_current_time", {"timezone": "UTC"}), "It is noon in UTC.")

    reply, streamed = await ask(services, "what time is it?", streamed=True)

    assert reply.ok and reply.text == "It is noon in UTC."
    assert streamed == "It is noon in UTC."
    roles = [m.role for m in await history(services).messages("C1")]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_responses_against_a_server_without_it_names_the_fix(
    make_services, fake_openai: FakeOpenAI, caplog
) -> None:
    """LLM_API=responses, the server answers 404 for /responses -> the person and the log
    are told to set LLM_API=chat; no retry."""
    services = make_services(LLM_API="responses")
    fake_openai.apis = {"chat"}

    reply, _ = await ask(services)

    assert not reply.ok and "LLM_API=chat" in reply.text
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("LLM_API=chat" in line for line in errors)
    assert [r.status for r in fake_openai.requests] == [404]
    (turn,) = await history(services).turns("C1")
    assert turn.error.startswith("no_responses_api")


async def test_an_unknown_model_is_not_mistaken_for_a_missing_api(
    make_services, fake_openai: FakeOpenAI
) -> None:
    from tests.fakes.openai_server import Fail

    services = make_services(LLM_API="responses")
    fake_openai.script(Fail(404, code="model_not_found"))
    reply, _ = await ask(services)
    assert not reply.ok and "LLM_API" not in reply.text


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("streamed", [False, True], ids=["posted", "streamed"])
async def test_headers_temperature_and_reasoning_effort_reach_the_server(
    make_services, fake_openai: FakeOpenAI, api: str, streamed: bool
) -> None:
    services = make_services(
        LLM_API=api,
        OPENAI_DEFAULT_HEADERS='{"X-Gateway-Team": "ops"}',
        OPENAI_TEMPERATURE=0.2,
        OPENAI_REASONING_EFFORT="low",
    )
    fake_openai.script(Reply(text="fine"))

    reply, _ = await ask(services, streamed=streamed)

    assert reply.ok, reply.text
    (request,) = fake_openai.requests
    assert request.headers["x-gateway-team"] == "ops"
    assert request.body["temperature"] == 0.2
    if api == "chat":
        assert request.body["reasoning_effort"] == "low"
    else:
        assert request.body["reasoning"] == {"effort": "low"}


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_unset_options_are_not_sent(make_services, fake_openai: FakeOpenAI, api: str) -> None:
    services = make_services(LLM_API=api)
    fake_openai.script(Reply(text="fine"))
    await ask(services)
    (request,) = fake_openai.requests
    assert not {"temperature", "reasoning_effort", "reasoning"} & set(request.body)
