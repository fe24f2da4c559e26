"""The fake OpenAI server, driven by the real `openai` client over real HTTP."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.fakes.openai_server import Fail, FakeOpenAI, Hang, Raw, Reply, Request, ToolUse
from tests.fakes.serve import serve_in_thread

KEY = "test-key"
MODEL = "gpt-4o"

NOW_CHAT = {
    "type": "function",
    "function": {
        "name": "now",
        "description": "The current time.",
        "parameters": {"type": "object", "properties": {}},
    },
}
NOW_RESP = {
    "type": "function",
    "name": "now",
    "description": "The current time.",
    "parameters": {"type": "object", "properties": {}},
    "strict": False,
}
WEATHER_CHAT = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
WEATHER_RESP = {
    "type": "function",
    "name": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}
USER = {"role": "user", "content": "What time is it?"}


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAI) -> FakeOpenAI:
    server.reset()
    return server


@pytest.fixture
async def client(fake: FakeOpenAI):
    async with openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0) as c:
        yield c


def raw_post(fake: FakeOpenAI, path: str, body: dict[str, Any], key: str | None = KEY):
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.post(f"{fake.base_url}/{path}", json=body, headers=headers, timeout=5)


# ---------------------------------------------------------------------------------------------
# Plain replies


async def test_chat_text_reply(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(text="It is noon.", usage=(12, 3)))
    completion = await client.chat.completions.create(model=MODEL, messages=[USER])

    assert completion.choices[0].message.content == "It is noon."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (12, 3)
    assert completion.usage.total_tokens == 15
    [req] = fake.requests
    assert (req.api, req.path, req.status, req.error) == ("chat", "/v1/chat/completions", 200, None)
    assert req.body["messages"] == [USER]
    assert req.headers["authorization"] == f"Bearer {KEY}"


async def test_responses_text_reply(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(text="It is noon."))
    response = await client.responses.create(model=MODEL, input="What time is it?")

    assert response.output_text == "It is noon."
    assert response.status == "completed"
    assert response.usage is not None and response.usage.total_tokens > 0
    assert response.id.startswith("resp_") and response.output[0].id.startswith("msg_")
    assert fake.requests[0].api == "responses"


def test_bodies_validate_strictly_against_openai_types(fake: FakeOpenAI):
    # The client builds its objects leniently; validate the raw JSON with pydantic instead.
    fake.script(
        Reply(text="Let me check.", tool_calls=[ToolUse("now", {})]),
        Reply(text="Let me check.", tool_calls=[ToolUse("now", {})]),
    )
    chat = raw_post(
        fake, "chat/completions", {"model": MODEL, "messages": [USER], "tools": [NOW_CHAT]}
    )
    resp = raw_post(fake, "responses", {"model": MODEL, "input": "hi", "tools": [NOW_RESP]})
    assert chat.status_code == resp.status_code == 200
    completion = ChatCompletion.model_validate(chat.json())
    assert completion.choices[0].message.tool_calls[0].function.name == "now"
    response = Response.model_validate(resp.json())
    assert [item.type for item in response.output] == ["message", "function_call"]
    assert chat.headers["x-request-id"].startswith("req_")


def test_sync_client(fake: FakeOpenAI):
    fake.script(Reply(text="sync works"))
    with openai.OpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0) as sync_client:
        completion = sync_client.chat.completions.create(model=MODEL, messages=[USER])
    assert completion.choices[0].message.content == "sync works"


async def test_responder_and_callable_steps(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    seen: list[Request] = []

    def step(req: Request) -> Reply:
        seen.append(req)
        return Reply(text=f"you said {req.body['messages'][-1]['content']}")

    async def responder(req: Request) -> str:
        return "from responder"

    fake.script(step)
    fake.responder = responder
    first = await client.chat.completions.create(model=MODEL, messages=[USER])
    second = await client.chat.completions.create(model=MODEL, messages=[USER])
    assert first.choices[0].message.content == "you said What time is it?"
    assert second.choices[0].message.content == "from responder"
    assert seen == [fake.requests[0]]


async def test_no_scripted_reply_is_a_500_without_retries(fake: FakeOpenAI):
    async with openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY) as retrying:
        with pytest.raises(openai.InternalServerError, match="fake: no scripted reply"):
            await retrying.chat.completions.create(model=MODEL, messages=[USER])
    assert len(fake.requests) == 1  # x-should-retry: false


async def test_finish_reason_length(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(text="It is no", finish_reason="length"))
    fake.script(Reply(text="It is no", finish_reason="length"))
    completion = await client.chat.completions.create(model=MODEL, messages=[USER])
    response = await client.responses.create(model=MODEL, input="hi")
    assert completion.choices[0].finish_reason == "length"
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "It is no"


# ---------------------------------------------------------------------------------------------
# Tool calls


async def test_chat_tool_round_trip(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(tool_calls=[ToolUse("now", {})]), Reply(text="It is noon."))
    first = await client.chat.completions.create(model=MODEL, messages=[USER], tools=[NOW_CHAT])
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    [call] = message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert (call.function.name, call.function.arguments) == ("now", "{}")

    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": "now", "arguments": call.function.arguments},
            }
        ],
    }
    tool = {"role": "tool", "tool_call_id": call.id, "content": "12:00"}
    second = await client.chat.completions.create(
        model=MODEL, messages=[USER, assistant, tool], tools=[NOW_CHAT]
    )
    assert second.choices[0].message.content == "It is noon."
    assert [r.status for r in fake.requests] == [200, 200]
    assert fake.requests[1].body["messages"][2] == tool


async def test_responses_tool_round_trip(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(tool_calls=[ToolUse("now", {}, call_id="call_fixed")]), Reply(text="Noon."))
    first = await client.responses.create(model=MODEL, input=[USER], tools=[NOW_RESP])
    [call] = first.output
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_fixed", "now", "{}")
    assert call.id.startswith("fc_") and call.status == "completed"

    follow_up = [
        USER,
        *[item.to_dict() for item in first.output],
        {"type": "function_call_output", "call_id": "call_fixed", "output": "12:00"},
    ]
    second = await client.responses.create(model=MODEL, input=follow_up, tools=[NOW_RESP])
    assert second.output_text == "Noon."
    assert [r.status for r in fake.requests] == [200, 200]


async def test_responses_previous_response_id(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(tool_calls=[ToolUse("now", {})]), Reply(text="Noon."))
    first = await client.responses.create(model=MODEL, input="time?", tools=[NOW_RESP])
    output = {"type": "function_call_output", "call_id": first.output[0].call_id, "output": "12"}
    second = await client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[output], tools=[NOW_RESP]
    )
    assert second.output_text == "Noon."
    with pytest.raises(openai.BadRequestError, match="Previous response with id 'resp_nope'"):
        await client.responses.create(model=MODEL, previous_response_id="resp_nope", input="x")


async def test_parallel_tool_calls(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    calls = [ToolUse("weather", {"city": "Oslo"}), ToolUse("weather", {"city": "Rome"})]
    fake.script(Reply(tool_calls=calls), Reply(text="Cold and warm."))
    fake.script(Reply(tool_calls=calls), Reply(text="Cold and warm."))

    chat = await client.chat.completions.create(model=MODEL, messages=[USER], tools=[WEATHER_CHAT])
    tool_calls = chat.choices[0].message.tool_calls
    assert [json.loads(c.function.arguments)["city"] for c in tool_calls] == ["Oslo", "Rome"]
    assert len({c.id for c in tool_calls}) == 2
    assistant = {
        "role": "assistant",
        "tool_calls": [c.model_dump(exclude_none=True) for c in tool_calls],
    }
    results = [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in tool_calls]
    done = await client.chat.completions.create(
        model=MODEL, messages=[USER, assistant, *reversed(results)], tools=[WEATHER_CHAT]
    )
    assert done.choices[0].message.content == "Cold and warm."

    resp = await client.responses.create(model=MODEL, input=[USER], tools=[WEATHER_RESP])
    fcs = [item for item in resp.output if item.type == "function_call"]
    assert len(fcs) == 2
    outputs = [{"type": "function_call_output", "call_id": f.call_id, "output": "ok"} for f in fcs]
    done = await client.responses.create(
        model=MODEL, input=[USER, *[f.to_dict() for f in fcs], *outputs], tools=[WEATHER_RESP]
    )
    assert done.output_text == "Cold and warm."


async def test_tool_call_arguments_sent_verbatim(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(tool_calls=[ToolUse("weather", '{"city": "Os')]))
    chat = await client.chat.completions.create(model=MODEL, messages=[USER], tools=[WEATHER_CHAT])
    assert chat.choices[0].message.tool_calls[0].function.arguments == '{"city": "Os'


async def test_hallucinated_tool_name_is_allowed(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(tool_calls=[ToolUse("no_such_tool", {})]))
    chat = await client.chat.completions.create(model=MODEL, messages=[USER], tools=[NOW_CHAT])
    assert chat.choices[0].message.tool_calls[0].function.name == "no_such_tool"


@pytest.mark.parametrize(
    ("api", "extra"),
    [
        ("chat", {}),
        ("chat", {"tools": [NOW_CHAT], "tool_choice": "none"}),
        ("responses", {}),
        ("responses", {"tools": [NOW_RESP], "tool_choice": "none"}),
    ],
)
async def test_scripted_tool_call_with_tools_disabled(
    fake: FakeOpenAI, client: openai.AsyncOpenAI, api: str, extra: dict[str, Any]
):
    fake.script(Reply(tool_calls=[ToolUse("now", {})]))
    with pytest.raises(openai.InternalServerError, match="tools are disabled"):
        if api == "chat":
            await client.chat.completions.create(model=MODEL, messages=[USER], **extra)
        else:
            await client.responses.create(model=MODEL, input="hi", **extra)
    assert fake.requests[0].status == 500


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
    fake: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake.script(Reply(text="A PNG."), Reply(text="A PNG again."))
    await client.chat.completions.create(model=MODEL, **_chat_image({"url": PNG_URL}))
    image = {"type": "input_image", "image_url": PNG_URL, "detail": "auto"}
    question = [{"type": "input_text", "text": "what is this?"}, image]
    await client.responses.create(model=MODEL, input=[{"role": "user", "content": question}])
    assert [r.status for r in fake.requests] == [200, 200]


@pytest.mark.parametrize(("override", "message"), CHAT_REJECTIONS)
async def test_chat_rejections(
    fake: FakeOpenAI, client: openai.AsyncOpenAI, override: dict[str, Any], message: str
):
    fake.script(Reply(text="never sent"))
    params: dict[str, Any] = {"model": MODEL, "messages": [USER], **override}
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(**params)
    assert message in info.value.message
    assert info.value.status_code == 400
    [req] = fake.requests
    assert req.status == 400 and req.error is not None and message in req.error
    assert fake.pending == 1


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
    fake: FakeOpenAI, client: openai.AsyncOpenAI, override: dict[str, Any], message: str
):
    fake.script(Reply(text="never sent"))
    params: dict[str, Any] = {"model": MODEL, "input": "hi", **override}
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(**params)
    assert message in info.value.message
    [req] = fake.requests
    assert req.status == 400 and req.error is not None and message in req.error
    assert fake.pending == 1


def test_missing_model(fake: FakeOpenAI):
    for path, body in (("chat/completions", {"messages": [USER]}), ("responses", {"input": "x"})):
        answer = raw_post(fake, path, body)
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == "you must provide a model parameter"


def test_unknown_path_and_bad_json(fake: FakeOpenAI):
    answer = raw_post(fake, "embeddings", {"model": MODEL, "input": "x"})
    assert answer.status_code == 404
    assert answer.json()["error"]["message"] == "Invalid URL (POST /v1/embeddings)"
    answer = httpx.post(
        f"{fake.base_url}/chat/completions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert "could not parse the JSON body" in answer.json()["error"]["message"]
    assert [r.status for r in fake.requests] == [404, 400]


async def test_sampling_parameters_are_checked_and_echoed(
    fake: FakeOpenAI, client: openai.AsyncOpenAI
):
    fake.script(Reply(text="warm"), Reply(text="careful"))
    await client.chat.completions.create(
        model=MODEL, messages=[USER], temperature=0.2, reasoning_effort="low"
    )
    response = await client.responses.create(
        model=MODEL, input="hi", temperature=0, reasoning={"effort": "minimal"}
    )
    assert response.temperature == 0 and response.reasoning.effort == "minimal"
    assert fake.requests[0].body["reasoning_effort"] == "low"

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
        answer = raw_post(fake, path, {"model": MODEL, **body})
        assert answer.status_code == 400 and message in answer.json()["error"]["message"]


def test_a_reply_s_token_budget_is_checked_as_the_api_checks_it(fake: FakeOpenAI):
    fake.script(Reply(text="short"), Reply(text="short"))
    chat = {"model": MODEL, "messages": [USER], "max_completion_tokens": 1}
    assert raw_post(fake, "chat/completions", chat).status_code == 200
    assert raw_post(fake, "responses", {"model": MODEL, "input": "x", "max_output_tokens": 16})

    rejected = [
        ("chat/completions", {"messages": [USER], "max_completion_tokens": 0}, ">= 1"),
        ("chat/completions", {"messages": [USER], "max_tokens": "ten"}, "expected an integer"),
        ("responses", {"input": "x", "max_output_tokens": 15}, "Expected a value >= 16"),
    ]
    for path, body, message in rejected:
        answer = raw_post(fake, path, {"model": MODEL, **body})
        assert answer.status_code == 400 and message in answer.json()["error"]["message"]


def test_raw_bodies_are_sent_as_they_are(fake: FakeOpenAI):
    fake.script(
        Raw({"id": "chatcmpl-1", "object": "chat.completion"}), Raw(["not", "an", "object"])
    )
    assert raw_post(fake, "chat/completions", {"model": MODEL, "messages": [USER]}).json() == {
        "id": "chatcmpl-1",
        "object": "chat.completion",
    }
    assert raw_post(fake, "responses", {"model": MODEL, "input": "x"}).json() == [
        "not",
        "an",
        "object",
    ]
    # the request is still checked first: a bad one does not consume the step
    fake.script(Raw({}))
    assert raw_post(fake, "responses", {"model": MODEL}).status_code == 400
    assert fake.pending == 1


def test_raw_events_are_streamed_as_they_are(fake: FakeOpenAI):
    fake.script(Raw(events=({"choices": "none"}, "{not json")))
    body = {"model": MODEL, "messages": [USER], "stream": True}
    answer = raw_post(fake, "chat/completions", body)
    assert answer.text == 'data: {"choices": "none"}\n\ndata: {not json\n\ndata: [DONE]\n\n'


async def test_a_server_without_the_responses_api(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.apis = {"chat"}
    fake.script(Reply(text="chat still works"))
    with pytest.raises(openai.NotFoundError) as info:
        await client.responses.create(model=MODEL, input="hi")
    assert info.value.body == {"detail": "Not Found"}
    completion = await client.chat.completions.create(model=MODEL, messages=[USER])
    assert completion.choices[0].message.content == "chat still works"
    assert [r.status for r in fake.requests] == [404, 200]
    fake.reset()
    assert fake.apis == {"chat", "responses"}


# ---------------------------------------------------------------------------------------------
# Authentication and failures


async def test_wrong_api_key(fake: FakeOpenAI):
    fake.script(Reply(text="never sent"))
    async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="sk-wrong-key-123") as bad:
        with pytest.raises(openai.AuthenticationError) as info:
            await bad.chat.completions.create(model=MODEL, messages=[USER])
    assert info.value.code == "invalid_api_key"
    assert "Incorrect API key provided: sk-*********-123. You can find" in info.value.message
    missing = raw_post(fake, "responses", {"model": MODEL, "input": "x"}, key=None)
    assert missing.status_code == 401
    assert missing.json()["error"]["message"].startswith("You didn't provide an API key.")
    assert [r.status for r in fake.requests] == [401, 401]
    assert fake.pending == 1


async def test_rate_limit_then_success_with_one_retry(fake: FakeOpenAI):
    fake.script(Fail(429, headers={"retry-after": "0.1"}), Reply(text="finally"))
    async with openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=1) as c:
        completion = await c.chat.completions.create(model=MODEL, messages=[USER])
    assert completion.choices[0].message.content == "finally"
    assert [r.status for r in fake.requests] == [429, 200]
    assert fake.requests[1].headers["x-stainless-retry-count"] == "1"


async def test_fail_bodies(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(
        Fail(429, code="insufficient_quota", type="insufficient_quota"),
        Fail(400, code="context_length_exceeded"),
        Fail(400, code="context_length_exceeded"),
        Fail(503, message="Slow down"),
    )
    with pytest.raises(openai.RateLimitError) as quota:
        await client.chat.completions.create(model=MODEL, messages=[USER])
    assert quota.value.code == "insufficient_quota"
    assert quota.value.type == "insufficient_quota"
    assert "You exceeded your current quota" in quota.value.message
    with pytest.raises(openai.BadRequestError) as context:
        await client.chat.completions.create(model=MODEL, messages=[USER])
    assert context.value.code == "context_length_exceeded"
    assert "maximum context length" in context.value.message
    with pytest.raises(openai.BadRequestError) as context:
        await client.responses.create(model=MODEL, input="hi")
    assert context.value.code == "context_length_exceeded"
    with pytest.raises(openai.InternalServerError, match="Slow down") as overloaded:
        await client.responses.create(model=MODEL, input="hi")
    assert overloaded.value.status_code == 503


async def test_hang_lets_the_client_time_out(fake: FakeOpenAI):
    fake.script(Hang(5))
    started = time.monotonic()
    async with openai.AsyncOpenAI(
        base_url=fake.base_url, api_key=KEY, max_retries=0, timeout=0.3
    ) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model=MODEL, messages=[USER])
    assert time.monotonic() - started < 2


async def test_latency_overlaps(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.latency = 0.5
    fake.script(Reply(text="a"), Reply(text="b"))
    started = time.monotonic()
    first, second = await asyncio.gather(
        client.chat.completions.create(model=MODEL, messages=[USER]),
        client.responses.create(model=MODEL, input="hi"),
    )
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 0.9
    assert {first.choices[0].message.content, second.output_text} == {"a", "b"}


# ---------------------------------------------------------------------------------------------
# Streaming


async def test_chat_streaming(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    text = "The time in Oslo is noon, and in Rome too."
    calls = [ToolUse("weather", {"city": "Oslo"}), ToolUse("now", {})]
    fake.script(Reply(text=text, tool_calls=calls, usage=(40, 20)))
    stream = await client.chat.completions.create(
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


async def test_chat_stream_helper(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(text="Streaming helper text", tool_calls=[ToolUse("now", {})]))
    async with client.chat.completions.stream(
        model=MODEL, messages=[USER], tools=[NOW_CHAT]
    ) as stream:
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Streaming helper text"
    assert message.tool_calls[0].function.name == "now"


async def test_responses_streaming_events(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    text = "It is noon in Oslo right now."
    fake.script(Reply(text=text, tool_calls=[ToolUse("weather", {"city": "Oslo"})]))
    stream = await client.responses.create(
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


async def test_responses_stream_helper(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    fake.script(Reply(text="Helper text.", tool_calls=[ToolUse("now", {}, call_id="call_s")]))
    async with client.responses.stream(model=MODEL, input="hi", tools=[NOW_RESP]) as stream:
        text = ""
        async for event in stream:
            if event.type == "response.output_text.delta":
                text += event.delta
        final = await stream.get_final_response()
    assert text == final.output_text == "Helper text."
    call = final.output[1]
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_s", "now", "{}")
    assert fake.requests[0].stream


async def test_streaming_incomplete_response(fake: FakeOpenAI, client: openai.AsyncOpenAI):
    # Like the real API, a truncated response ends with `response.incomplete`, not `.completed`
    # (so the stream helper's get_final_response() raises on it).
    fake.script(Reply(text="cut sho", finish_reason="length"))
    fake.script(Reply(text="cut sho", finish_reason="length"))
    events = [e async for e in await client.responses.create(model=MODEL, input="hi", stream=True)]
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.status == "incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.output_text == "cut sho"

    chunks = await client.chat.completions.create(model=MODEL, messages=[USER], stream=True)
    finishes = [c.choices[0].finish_reason async for c in chunks if c.choices]
    assert finishes[-1] == "length"


# ---------------------------------------------------------------------------------------------
# The generic server helper


def test_serve_in_thread_generic():
    async def hello(request):
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/hello", hello)])
    with serve_in_thread(app) as served:
        assert served.url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{served.url}/hello").text == "hello"
    assert not served.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{served.url}/hello")
