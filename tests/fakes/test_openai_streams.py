"""The fake OpenAI server's streamed answers, read by the real `openai` client."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from tests.fakes.conftest import (
    MODEL,
    NOW_CHAT,
    NOW_RESP,
    USER,
    WEATHER_CHAT,
    WEATHER_RESP,
)
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse

# ---------------------------------------------------------------------------------------------
# Streaming


async def test_chat_streaming(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    text = "The time in Oslo is noon, and in Rome too."
    calls = [ToolUse("weather", {"city": "Oslo"}), ToolUse("now", {})]
    fake_openai.script(Reply(text=text, tool_calls=calls, usage=(40, 20)))
    stream = await openai_client.chat.completions.create(
        model=MODEL,
        messages=[USER],
        tools=[WEATHER_CHAT, NOW_CHAT],
        stream=True,
        stream_options={"include_usage": True},
    )
    content: list[str] = []
    tool_calls: dict[int, dict[str, str]] = {}
    finish = usage = None
    chunks = 0
    async for chunk in stream:
        ChatCompletionChunk.model_validate(chunk.to_dict())
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            if choice.delta.content:
                content.append(choice.delta.content)
            for delta in choice.delta.tool_calls or []:
                slot = tool_calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                if delta.id:
                    slot["id"] = delta.id
                if delta.function and delta.function.name:
                    slot["name"] = delta.function.name
                if delta.function and delta.function.arguments:
                    slot["arguments"] += delta.function.arguments
    assert len(content) > 2  # split into several chunks
    assert "".join(content) == text
    assert [(c["name"], json.loads(c["arguments"])) for c in tool_calls.values()] == [
        ("weather", {"city": "Oslo"}),
        ("now", {}),
    ]
    assert all(c["id"].startswith("call_") for c in tool_calls.values())
    assert finish == "tool_calls"
    assert usage is not None and usage.total_tokens == 60
    assert chunks > 6


async def test_chat_stream_helper(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.script(Reply(text="Streaming helper text", tool_calls=[ToolUse("now", {})]))
    async with openai_client.chat.completions.stream(
        model=MODEL, messages=[USER], tools=[NOW_CHAT]
    ) as stream:
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Streaming helper text"
    assert message.tool_calls[0].function.name == "now"


async def test_responses_streaming_events(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    text = "It is noon in Oslo right now."
    fake_openai.script(Reply(text=text, tool_calls=[ToolUse("weather", {"city": "Oslo"})]))
    stream = await openai_client.responses.create(
        model=MODEL, input="hi", tools=[WEATHER_RESP], stream=True
    )
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    types: list[str] = []
    deltas: list[str] = []
    arguments = ""
    final = None
    async for event in stream:
        adapter.validate_python(event.to_dict())
        types.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type == "response.function_call_arguments.delta":
            arguments += event.delta
        elif event.type == "response.completed":
            final = event.response
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert {"response.output_item.added", "response.output_item.done"} <= set(types)
    assert len(deltas) > 2 and "".join(deltas) == text
    assert json.loads(arguments) == {"city": "Oslo"}
    assert final is not None and final.output_text == text
    assert [item.type for item in final.output] == ["message", "function_call"]


async def test_responses_stream_helper(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.script(
        Reply(text="Helper text.", tool_calls=[ToolUse("now", {}, call_id="call_s")])
    )
    async with openai_client.responses.stream(model=MODEL, input="hi", tools=[NOW_RESP]) as stream:
        text = ""
        async for event in stream:
            if event.type == "response.output_text.delta":
                text += event.delta
        final = await stream.get_final_response()
    assert text == final.output_text == "Helper text."
    call = final.output[1]
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_s", "now", "{}")
    assert fake_openai.requests[0].stream


async def test_streaming_incomplete_response(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    # Like the real API, a truncated response ends with `response.incomplete`, not `.completed`
    # (so the stream helper's get_final_response() raises on it).
    fake_openai.script(Reply(text="cut sho", finish_reason="length"))
    fake_openai.script(Reply(text="cut sho", finish_reason="length"))
    events = [
        e async for e in await openai_client.responses.create(model=MODEL, input="hi", stream=True)
    ]
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.status == "incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.output_text == "cut sho"

    chunks = await openai_client.chat.completions.create(model=MODEL, messages=[USER], stream=True)
    finishes = [c.choices[0].finish_reason async for c in chunks if c.choices]
    assert finishes[-1] == "length"


# ---------------------------------------------------------------------------------------------
