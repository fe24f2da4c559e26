"""What the fake OpenAI server refuses, with the real API's messages: a rejected request
consumes no step."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.conftest import (
    MODEL,
    NOW_CHAT,
    NOW_RESP,
    OPENAI_KEY,
    USER,
    WEATHER_CHAT,
    raw_post,
)
from tests.fakes.openai_server import FakeOpenAI, Raw, Reply

# ---------------------------------------------------------------------------------------------
# Rejections (400 with the real API's messages); a rejected request consumes no step

ASSISTANT_CALL = {
    "role": "assistant",
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    ],
}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}

CHAT_REJECTIONS = [
    ({"messages": []}, "Invalid 'messages': empty array."),
    ({"messages": "hi"}, "Invalid type for 'messages': expected an array"),
    (
        {"messages": [{"role": "robot", "content": "hi"}]},
        "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', "
        "'function', 'tool', and 'developer'.",
    ),
    (
        {"messages": [USER, TOOL_RESULT]},
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.",
    ),
    (
        {"messages": [USER, ASSISTANT_CALL, {**TOOL_RESULT, "tool_call_id": "call_2"}]},
        "messages with role 'tool' must be a response to a preceeding message",
    ),
    (
        {"messages": [USER, ASSISTANT_CALL, USER]},
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        "call_1",
    ),
    ({"messages": [USER, ASSISTANT_CALL]}, "did not have response messages: call_1"),
    (
        {
            "messages": [
                USER,
                {"role": "assistant", "tool_calls": ASSISTANT_CALL["tool_calls"] * 2},
                TOOL_RESULT,
            ]
        },
        "Duplicate value for 'tool_calls.id' of 'call_1'",
    ),
    (
        {"messages": [USER, ASSISTANT_CALL, TOOL_RESULT, TOOL_RESULT]},
        "Invalid parameter: Duplicate value for 'tool_call_id' of 'call_1', in messages[2] "
        "and messages[3].",
    ),
    (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "now", "arguments": {}},
                        }
                    ],
                },
                TOOL_RESULT,
            ]
        },
        "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, "
        "but got an object instead.",
    ),
    ({"tools": [NOW_RESP]}, "Missing required parameter: 'tools[0].function'."),
    (
        {"tools": [{"type": "function", "function": {"name": "what time", "parameters": {}}}]},
        "Invalid 'tools[0].function.name': string does not match pattern.",
    ),
    (
        {"tools": [{"type": "function", "function": {"name": "x" * 65}}]},
        "Invalid 'tools[0].function.name': string too long.",
    ),
    (
        {
            "tools": [
                {"type": "function", "function": {"name": "now", "parameters": {"type": "string"}}}
            ]
        },
        """Invalid schema for function 'now': schema must be a JSON Schema of 'type: "object"', """
        """got 'type: "string"'.""",
    ),
    (
        {
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "weather",
                        "strict": True,
                        "parameters": WEATHER_CHAT["function"]["parameters"],
                    },
                }
            ]
        },
        "Invalid schema for function 'weather': In context=(), 'additionalProperties' is "
        "required to be supplied and to be false.",
    ),
    (
        {"tool_choice": "auto"},
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
        "specified.",
    ),
]


PNG_URL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n0000").decode()


def _chat_image(url: Any) -> dict[str, Any]:
    parts = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": url}]
    return {"messages": [{"role": "user", "content": parts}]}


CHAT_REJECTIONS += [
    (_chat_image("nope"), "Invalid type for 'messages[0].content[1].image_url'"),
    (_chat_image({"url": "data:image/bmp;base64,Qk0="}), "Invalid MIME type."),
    (_chat_image({"url": "data:image/png;base64,aGVsbG8="}), "unsupported image"),
    (_chat_image({"url": PNG_URL, "detail": "max"}), "Invalid value: 'max'"),
    (
        {"messages": [{"role": "system", "content": [{"type": "image_url"}]}, USER]},
        "Invalid value: 'image_url'. Supported values are: 'text'.",
    ),
]


async def test_image_parts_are_accepted_in_both_modes(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
) -> None:
    fake_openai.script(Reply(text="A PNG."), Reply(text="A PNG again."))
    await openai_client.chat.completions.create(model=MODEL, **_chat_image({"url": PNG_URL}))
    image = {"type": "input_image", "image_url": PNG_URL, "detail": "auto"}
    question = [{"type": "input_text", "text": "what is this?"}, image]
    await openai_client.responses.create(model=MODEL, input=[{"role": "user", "content": question}])
    assert [r.status for r in fake_openai.requests] == [200, 200]


@pytest.mark.parametrize(("override", "message"), CHAT_REJECTIONS)
async def test_chat_rejections(
    fake_openai: FakeOpenAI,
    openai_client: openai.AsyncOpenAI,
    override: dict[str, Any],
    message: str,
):
    fake_openai.script(Reply(text="never sent"))
    params: dict[str, Any] = {"model": MODEL, "messages": [USER], **override}
    with pytest.raises(openai.BadRequestError) as info:
        await openai_client.chat.completions.create(**params)
    assert message in info.value.message
    assert info.value.status_code == 400
    [req] = fake_openai.requests
    assert req.status == 400 and req.error is not None and message in req.error
    assert fake_openai.pending == 1


RESPONSES_REJECTIONS = [
    ({"input": 42}, "Invalid type for 'input'"),
    ({"input": [{"content": "no type, no role"}]}, "Missing required parameter: 'input[0].type'."),
    (
        {"input": [{"role": "robot", "content": "hi"}]},
        "Invalid value: 'robot'. Supported values are: 'user', 'assistant', 'system', and "
        "'developer'.",
    ),
    (
        {
            "input": [
                USER,
                {"role": "assistant", "content": [{"type": "input_text", "text": "It is"}]},
            ]
        },
        "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
    ),
    (
        {"input": [USER, {"type": "function_call_output", "call_id": "call_9", "output": "x"}]},
        "No tool call found for function call output with call_id call_9.",
    ),
    (
        {
            "input": [
                USER,
                {"type": "function_call", "call_id": "call_9", "name": "now", "arguments": "{}"},
            ]
        },
        "No tool output found for function call call_9.",
    ),
    (
        {
            "input": [
                USER,
                {
                    "type": "function_call",
                    "id": "call_9",
                    "call_id": "call_9",
                    "name": "now",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "call_9", "output": "x"},
            ]
        },
        "Invalid 'input[1].id': 'call_9'. Expected an ID that begins with 'fc'.",
    ),
    (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": PNG_URL}]}]},
        "Missing required parameter: 'input[0].content[0].detail'.",
    ),
    (
        {
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_image", "image_url": "x", "detail": "auto"}],
                }
            ]
        },
        "Invalid image URL",
    ),
    ({"tools": [NOW_CHAT]}, "Missing required parameter: 'tools[0].name'."),
    (
        {"tools": [{**NOW_RESP, "name": "now!"}]},
        "Invalid 'tools[0].name': string does not match pattern.",
    ),
    (
        {"tools": [{**NOW_RESP, "parameters": "none"}]},
        "Invalid type for 'tools[0].parameters': expected an object, but got a string instead.",
    ),
]


@pytest.mark.parametrize(("override", "message"), RESPONSES_REJECTIONS)
async def test_responses_rejections(
    fake_openai: FakeOpenAI,
    openai_client: openai.AsyncOpenAI,
    override: dict[str, Any],
    message: str,
):
    fake_openai.script(Reply(text="never sent"))
    params: dict[str, Any] = {"model": MODEL, "input": "hi", **override}
    with pytest.raises(openai.BadRequestError) as info:
        await openai_client.responses.create(**params)
    assert message in info.value.message
    [req] = fake_openai.requests
    assert req.status == 400 and req.error is not None and message in req.error
    assert fake_openai.pending == 1


def test_missing_model(fake_openai: FakeOpenAI):
    for path, body in (("chat/completions", {"messages": [USER]}), ("responses", {"input": "x"})):
        answer = raw_post(fake_openai, path, body)
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == "you must provide a model parameter"


def test_unknown_path_and_bad_json(fake_openai: FakeOpenAI):
    answer = raw_post(fake_openai, "embeddings", {"model": MODEL, "input": "x"})
    assert answer.status_code == 404
    assert answer.json()["error"]["message"] == "Invalid URL (POST /v1/embeddings)"
    answer = httpx.post(
        f"{fake_openai.base_url}/chat/completions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {OPENAI_KEY}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert "could not parse the JSON body" in answer.json()["error"]["message"]
    assert [r.status for r in fake_openai.requests] == [404, 400]


async def test_sampling_parameters_are_checked_and_echoed(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    fake_openai.script(Reply(text="warm"), Reply(text="careful"))
    await openai_client.chat.completions.create(
        model=MODEL, messages=[USER], temperature=0.2, reasoning_effort="low"
    )
    response = await openai_client.responses.create(
        model=MODEL, input="hi", temperature=0, reasoning={"effort": "minimal"}
    )
    assert response.temperature == 0 and response.reasoning.effort == "minimal"
    assert fake_openai.requests[0].body["reasoning_effort"] == "low"

    rejected = [
        ("chat/completions", {"messages": [USER], "temperature": 3}, "decimal above maximum"),
        ("chat/completions", {"messages": [USER], "temperature": "hot"}, "expected a decimal"),
        (
            "chat/completions",
            {"messages": [USER], "reasoning_effort": "max"},
            "Invalid value: 'max'",
        ),
        ("responses", {"input": "x", "reasoning": "low"}, "Invalid type for 'reasoning'"),
        ("responses", {"input": "x", "reasoning": {"effort": "lots"}}, "Invalid value: 'lots'"),
    ]
    for path, body, message in rejected:
        answer = raw_post(fake_openai, path, {"model": MODEL, **body})
        assert answer.status_code == 400 and message in answer.json()["error"]["message"]


def test_a_reply_s_token_budget_is_checked_as_the_api_checks_it(fake_openai: FakeOpenAI):
    fake_openai.script(Reply(text="short"), Reply(text="short"))
    chat = {"model": MODEL, "messages": [USER], "max_completion_tokens": 1}
    assert raw_post(fake_openai, "chat/completions", chat).status_code == 200
    assert raw_post(
        fake_openai, "responses", {"model": MODEL, "input": "x", "max_output_tokens": 16}
    )

    rejected = [
        ("chat/completions", {"messages": [USER], "max_completion_tokens": 0}, ">= 1"),
        ("chat/completions", {"messages": [USER], "max_tokens": "ten"}, "expected an integer"),
        ("responses", {"input": "x", "max_output_tokens": 15}, "Expected a value >= 16"),
    ]
    for path, body, message in rejected:
        answer = raw_post(fake_openai, path, {"model": MODEL, **body})
        assert answer.status_code == 400 and message in answer.json()["error"]["message"]


def test_raw_bodies_are_sent_as_they_are(fake_openai: FakeOpenAI):
    fake_openai.script(
        Raw({"id": "chatcmpl-1", "object": "chat.completion"}), Raw(["not", "an", "object"])
    )
    assert raw_post(
        fake_openai, "chat/completions", {"model": MODEL, "messages": [USER]}
    ).json() == {
        "id": "chatcmpl-1",
        "object": "chat.completion",
    }
    assert raw_post(fake_openai, "responses", {"model": MODEL, "input": "x"}).json() == [
        "not",
        "an",
        "object",
    ]
    # the request is still checked first: a bad one does not consume the step
    fake_openai.script(Raw({}))
    assert raw_post(fake_openai, "responses", {"model": MODEL}).status_code == 400
    assert fake_openai.pending == 1


def test_raw_events_are_streamed_as_they_are(fake_openai: FakeOpenAI):
    fake_openai.script(Raw(events=({"choices": "none"}, "{not json")))
    body = {"model": MODEL, "messages": [USER], "stream": True}
    answer = raw_post(fake_openai, "chat/completions", body)
    assert answer.text == 'data: {"choices": "none"}\n\ndata: {not json\n\ndata: [DONE]\n\n'


async def test_a_server_without_the_responses_api(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    fake_openai.apis = {"chat"}
    fake_openai.script(Reply(text="chat still works"))
    with pytest.raises(openai.NotFoundError) as info:
        await openai_client.responses.create(model=MODEL, input="hi")
    assert info.value.body == {"detail": "Not Found"}
    completion = await openai_client.chat.completions.create(model=MODEL, messages=[USER])
    assert completion.choices[0].message.content == "chat still works"
    assert [r.status for r in fake_openai.requests] == [404, 200]
    fake_openai.reset()
    assert fake_openai.apis == {"chat", "responses"}
