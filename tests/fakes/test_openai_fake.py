"""The fake OpenAI server, driven by the real `openai` client over real HTTP: replies, tool
calls, authentication and failures."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.fakes.conftest import (
    MODEL,
    NOW_CHAT,
    NOW_RESP,
    OPENAI_KEY,
    USER,
    WEATHER_CHAT,
    WEATHER_RESP,
    raw_post,
)
from tests.fakes.openai_server import Fail, FakeOpenAI, Hang, Reply, Request, ToolUse
from tests.fakes.serve import serve_in_thread

# ---------------------------------------------------------------------------------------------
# Plain replies


async def test_chat_text_reply(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.script(Reply(text="It is noon.", usage=(12, 3)))
    completion = await openai_client.chat.completions.create(model=MODEL, messages=[USER])

    assert completion.choices[0].message.content == "It is noon."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (12, 3)
    assert completion.usage.total_tokens == 15
    [req] = fake_openai.requests
    assert (req.api, req.path, req.status, req.error) == ("chat", "/v1/chat/completions", 200, None)
    assert req.body["messages"] == [USER]
    assert req.headers["authorization"] == f"Bearer {OPENAI_KEY}"


async def test_responses_text_reply(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.script(Reply(text="It is noon."))
    response = await openai_client.responses.create(model=MODEL, input="What time is it?")

    assert response.output_text == "It is noon."
    assert response.status == "completed"
    assert response.usage is not None and response.usage.total_tokens > 0
    assert response.id.startswith("resp_") and response.output[0].id.startswith("msg_")
    assert fake_openai.requests[0].api == "responses"


def test_bodies_validate_strictly_against_openai_types(fake_openai: FakeOpenAI):
    # The client builds its objects leniently; validate the raw JSON with pydantic instead.
    fake_openai.script(
        Reply(text="Let me check.", tool_calls=[ToolUse("now", {})]),
        Reply(text="Let me check.", tool_calls=[ToolUse("now", {})]),
    )
    chat = raw_post(
        fake_openai, "chat/completions", {"model": MODEL, "messages": [USER], "tools": [NOW_CHAT]}
    )
    resp = raw_post(fake_openai, "responses", {"model": MODEL, "input": "hi", "tools": [NOW_RESP]})
    assert chat.status_code == resp.status_code == 200
    completion = ChatCompletion.model_validate(chat.json())
    assert completion.choices[0].message.tool_calls[0].function.name == "now"
    response = Response.model_validate(resp.json())
    assert [item.type for item in response.output] == ["message", "function_call"]
    assert chat.headers["x-request-id"].startswith("req_")


def test_sync_client(fake_openai: FakeOpenAI):
    fake_openai.script(Reply(text="sync works"))
    with openai.OpenAI(
        base_url=fake_openai.base_url, api_key=OPENAI_KEY, max_retries=0
    ) as sync_client:
        completion = sync_client.chat.completions.create(model=MODEL, messages=[USER])
    assert completion.choices[0].message.content == "sync works"


async def test_responder_and_callable_steps(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    seen: list[Request] = []

    def step(req: Request) -> Reply:
        seen.append(req)
        return Reply(text=f"you said {req.body['messages'][-1]['content']}")

    async def responder(req: Request) -> str:
        return "from responder"

    fake_openai.script(step)
    fake_openai.responder = responder
    first = await openai_client.chat.completions.create(model=MODEL, messages=[USER])
    second = await openai_client.chat.completions.create(model=MODEL, messages=[USER])
    assert first.choices[0].message.content == "you said What time is it?"
    assert second.choices[0].message.content == "from responder"
    assert seen == [fake_openai.requests[0]]


async def test_no_scripted_reply_is_a_500_without_retries(fake_openai: FakeOpenAI):
    async with openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key=OPENAI_KEY) as retrying:
        with pytest.raises(openai.InternalServerError, match="fake: no scripted reply"):
            await retrying.chat.completions.create(model=MODEL, messages=[USER])
    assert len(fake_openai.requests) == 1  # x-should-retry: false


async def test_finish_reason_length(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.script(Reply(text="It is no", finish_reason="length"))
    fake_openai.script(Reply(text="It is no", finish_reason="length"))
    completion = await openai_client.chat.completions.create(model=MODEL, messages=[USER])
    response = await openai_client.responses.create(model=MODEL, input="hi")
    assert completion.choices[0].finish_reason == "length"
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "It is no"


# ---------------------------------------------------------------------------------------------
# Tool calls


async def test_chat_tool_round_trip(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.script(Reply(tool_calls=[ToolUse("now", {})]), Reply(text="It is noon."))
    first = await openai_client.chat.completions.create(
        model=MODEL, messages=[USER], tools=[NOW_CHAT]
    )
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
    second = await openai_client.chat.completions.create(
        model=MODEL, messages=[USER, assistant, tool], tools=[NOW_CHAT]
    )
    assert second.choices[0].message.content == "It is noon."
    assert [r.status for r in fake_openai.requests] == [200, 200]
    assert fake_openai.requests[1].body["messages"][2] == tool


async def test_responses_tool_round_trip(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    fake_openai.script(
        Reply(tool_calls=[ToolUse("now", {}, call_id="call_fixed")]), Reply(text="Noon.")
    )
    first = await openai_client.responses.create(model=MODEL, input=[USER], tools=[NOW_RESP])
    [call] = first.output
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_fixed", "now", "{}")
    assert call.id.startswith("fc_") and call.status == "completed"

    follow_up = [
        USER,
        *[item.to_dict() for item in first.output],
        {"type": "function_call_output", "call_id": "call_fixed", "output": "12:00"},
    ]
    second = await openai_client.responses.create(model=MODEL, input=follow_up, tools=[NOW_RESP])
    assert second.output_text == "Noon."
    assert [r.status for r in fake_openai.requests] == [200, 200]


async def test_responses_previous_response_id(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    fake_openai.script(Reply(tool_calls=[ToolUse("now", {})]), Reply(text="Noon."))
    first = await openai_client.responses.create(model=MODEL, input="time?", tools=[NOW_RESP])
    output = {"type": "function_call_output", "call_id": first.output[0].call_id, "output": "12"}
    second = await openai_client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[output], tools=[NOW_RESP]
    )
    assert second.output_text == "Noon."
    with pytest.raises(openai.BadRequestError, match="Previous response with id 'resp_nope'"):
        await openai_client.responses.create(
            model=MODEL, previous_response_id="resp_nope", input="x"
        )


async def test_parallel_tool_calls(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    calls = [ToolUse("weather", {"city": "Oslo"}), ToolUse("weather", {"city": "Rome"})]
    fake_openai.script(Reply(tool_calls=calls), Reply(text="Cold and warm."))
    fake_openai.script(Reply(tool_calls=calls), Reply(text="Cold and warm."))

    chat = await openai_client.chat.completions.create(
        model=MODEL, messages=[USER], tools=[WEATHER_CHAT]
    )
    tool_calls = chat.choices[0].message.tool_calls
    assert [json.loads(c.function.arguments)["city"] for c in tool_calls] == ["Oslo", "Rome"]
    assert len({c.id for c in tool_calls}) == 2
    assistant = {
        "role": "assistant",
        "tool_calls": [c.model_dump(exclude_none=True) for c in tool_calls],
    }
    results = [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in tool_calls]
    done = await openai_client.chat.completions.create(
        model=MODEL, messages=[USER, assistant, *reversed(results)], tools=[WEATHER_CHAT]
    )
    assert done.choices[0].message.content == "Cold and warm."

    resp = await openai_client.responses.create(model=MODEL, input=[USER], tools=[WEATHER_RESP])
    fcs = [item for item in resp.output if item.type == "function_call"]
    assert len(fcs) == 2
    outputs = [{"type": "function_call_output", "call_id": f.call_id, "output": "ok"} for f in fcs]
    done = await openai_client.responses.create(
        model=MODEL, input=[USER, *[f.to_dict() for f in fcs], *outputs], tools=[WEATHER_RESP]
    )
    assert done.output_text == "Cold and warm."


async def test_tool_call_arguments_sent_verbatim(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    fake_openai.script(Reply(tool_calls=[ToolUse("weather", '{"city": "Os')]))
    chat = await openai_client.chat.completions.create(
        model=MODEL, messages=[USER], tools=[WEATHER_CHAT]
    )
    assert chat.choices[0].message.tool_calls[0].function.arguments == '{"city": "Os'


async def test_hallucinated_tool_name_is_allowed(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    fake_openai.script(Reply(tool_calls=[ToolUse("no_such_tool", {})]))
    chat = await openai_client.chat.completions.create(
        model=MODEL, messages=[USER], tools=[NOW_CHAT]
    )
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
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI, api: str, extra: dict[str, Any]
):
    fake_openai.script(Reply(tool_calls=[ToolUse("now", {})]))
    with pytest.raises(openai.InternalServerError, match="tools are disabled"):
        if api == "chat":
            await openai_client.chat.completions.create(model=MODEL, messages=[USER], **extra)
        else:
            await openai_client.responses.create(model=MODEL, input="hi", **extra)
    assert fake_openai.requests[0].status == 500


# ---------------------------------------------------------------------------------------------
# Authentication and failures


async def test_wrong_api_key(fake_openai: FakeOpenAI):
    fake_openai.script(Reply(text="never sent"))
    async with openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key="sk-wrong-key-123") as bad:
        with pytest.raises(openai.AuthenticationError) as info:
            await bad.chat.completions.create(model=MODEL, messages=[USER])
    assert info.value.code == "invalid_api_key"
    assert "Incorrect API key provided: sk-*********-123. You can find" in info.value.message
    missing = raw_post(fake_openai, "responses", {"model": MODEL, "input": "x"}, key=None)
    assert missing.status_code == 401
    assert missing.json()["error"]["message"].startswith("You didn't provide an API key.")
    assert [r.status for r in fake_openai.requests] == [401, 401]
    assert fake_openai.pending == 1


async def test_rate_limit_then_success_with_one_retry(fake_openai: FakeOpenAI):
    fake_openai.script(Fail(429, headers={"retry-after": "0.1"}), Reply(text="finally"))
    async with openai.AsyncOpenAI(
        base_url=fake_openai.base_url, api_key=OPENAI_KEY, max_retries=1
    ) as c:
        completion = await c.chat.completions.create(model=MODEL, messages=[USER])
    assert completion.choices[0].message.content == "finally"
    assert [r.status for r in fake_openai.requests] == [429, 200]
    assert fake_openai.requests[1].headers["x-stainless-retry-count"] == "1"


async def test_fail_bodies(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.script(
        Fail(429, code="insufficient_quota", type="insufficient_quota"),
        Fail(400, code="context_length_exceeded"),
        Fail(400, code="context_length_exceeded"),
        Fail(503, message="Slow down"),
    )
    with pytest.raises(openai.RateLimitError) as quota:
        await openai_client.chat.completions.create(model=MODEL, messages=[USER])
    assert quota.value.code == "insufficient_quota"
    assert quota.value.type == "insufficient_quota"
    assert "You exceeded your current quota" in quota.value.message
    with pytest.raises(openai.BadRequestError) as context:
        await openai_client.chat.completions.create(model=MODEL, messages=[USER])
    assert context.value.code == "context_length_exceeded"
    assert "maximum context length" in context.value.message
    with pytest.raises(openai.BadRequestError) as context:
        await openai_client.responses.create(model=MODEL, input="hi")
    assert context.value.code == "context_length_exceeded"
    with pytest.raises(openai.InternalServerError, match="Slow down") as overloaded:
        await openai_client.responses.create(model=MODEL, input="hi")
    assert overloaded.value.status_code == 503


async def test_hang_lets_the_client_time_out(fake_openai: FakeOpenAI):
    fake_openai.script(Hang(5))
    started = time.monotonic()
    async with openai.AsyncOpenAI(
        base_url=fake_openai.base_url, api_key=OPENAI_KEY, max_retries=0, timeout=0.3
    ) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model=MODEL, messages=[USER])
    assert time.monotonic() - started < 2


async def test_latency_overlaps(fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI):
    fake_openai.latency = 0.5
    fake_openai.script(Reply(text="a"), Reply(text="b"))
    started = time.monotonic()
    first, second = await asyncio.gather(
        openai_client.chat.completions.create(model=MODEL, messages=[USER]),
        openai_client.responses.create(model=MODEL, input="hi"),
    )
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 0.9
    assert {first.choices[0].message.content, second.output_text} == {"a", "b"}


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
