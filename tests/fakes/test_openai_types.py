"""The fake OpenAI server holds requests and its own answers to the `openai` package's types."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from pydantic import ValidationError

from tests.fakes import openai_types
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse
from tests.fakes.openai_types import ChatCompletion, Response, event, sent

KEY = "test-key"
USER = {"role": "user", "content": "What time is it?"}
NOW = {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}


@pytest.fixture
def fake(fake_openai: FakeOpenAI) -> FakeOpenAI:
    return fake_openai


def post(fake: FakeOpenAI, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}"}
    return httpx.post(f"{fake.base_url}/{path}", json=body, headers=headers, timeout=5)


def test_the_types_are_those_of_the_installed_package():
    assert f"version {openai.__version__} " in " ".join(openai_types.__doc__.split())


async def test_an_unknown_argument_of_a_chat_completion_is_refused(fake: FakeOpenAI):
    fake.script("It is noon.")
    async with openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="gpt-4o", messages=[USER], extra_body={"temprature": 0.2}
            )
    assert refused.value.message == (
        "Error code: 400 - Unrecognized request argument supplied: temprature"
    )
    assert refused.value.body == {
        "message": "Unrecognized request argument supplied: temprature",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert fake.pending == 1  # a refused request takes no step


@pytest.mark.parametrize(
    ("path", "body", "message", "param", "code"),
    [
        (
            "chat/completions",
            {"model": "gpt-4o", "messages": [{**USER, "sender": "ann"}]},
            "Unknown parameter: 'messages[0].sender'.",
            "messages[0].sender",
            "unknown_parameter",
        ),
        (
            "chat/completions",
            {
                "model": "gpt-4o",
                "messages": [USER],
                "tools": [{**NOW, "function": {**NOW["function"], "strict_mode": True}}],
            },
            "Unknown parameter: 'tools[0].function.strict_mode'.",
            "tools[0].function.strict_mode",
            "unknown_parameter",
        ),
        (
            "chat/completions",
            {"model": "gpt-4o", "messages": [USER], "top_p": "high"},
            "Invalid type for 'top_p': expected a decimal, but got a string instead.",
            "top_p",
            "invalid_type",
        ),
        (
            "chat/completions",
            {"model": "gpt-4o", "messages": [USER], "stream": "yes"},
            "Invalid type for 'stream': expected a boolean, but got a string instead.",
            "stream",
            "invalid_type",
        ),
        (
            "responses",
            {"model": "gpt-4o", "input": "hi", "previous_response": "resp_1"},
            "Unknown parameter: 'previous_response'.",
            "previous_response",
            "unknown_parameter",
        ),
        (
            "responses",
            {
                "model": "gpt-4o",
                "input": [{"type": "message", "role": "user", "content": "hi", "ts": 1}],
            },
            "Unknown parameter: 'input[0].ts'.",
            "input[0].ts",
            "unknown_parameter",
        ),
        (
            "responses",
            {"model": "gpt-4o", "input": "hi", "tools": [{"type": "function", "name": "now"}]},
            "Missing required parameter: 'tools[0].parameters'.",
            "tools[0].parameters",
            "missing_required_parameter",
        ),
        (
            "responses",
            {"model": "gpt-4o", "input": "hi", "text": {"verbosity": "chatty"}},
            "Invalid value: 'chatty'. Supported values are: 'low', 'medium', and 'high'.",
            "text.verbosity",
            "invalid_value",
        ),
    ],
)
def test_what_the_types_do_not_have_is_refused(fake, path, body, message, param, code):
    fake.script("never sent")
    answer = post(fake, path, body)

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["message"], error["param"], error["code"]) == (message, param, code)
    assert error["type"] == "invalid_request_error"
    assert fake.pending == 1


def test_what_the_bot_sends_passes(fake: FakeOpenAI):
    fake.script(ToolUse("now"), "It is noon.")
    chat = {"model": "gpt-4o", "messages": [USER], "tools": [NOW], "stream": True}
    chat["stream_options"] = {"include_usage": True}
    call = {"type": "function", "name": "now", "parameters": {"type": "object"}, "strict": False}
    responses = {"model": "gpt-4o", "input": [USER], "tools": [call], "store": False}

    assert post(fake, "chat/completions", chat).status_code == 200
    assert post(fake, "responses", responses).status_code == 200


COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hi", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
}


def test_an_answer_is_sent_as_the_model_dumps_it():
    assert sent(ChatCompletion, COMPLETION) == COMPLETION  # the nulls set are sent, no more


@pytest.mark.parametrize(
    "field",
    [
        lambda c: c.update(choice_count=1),
        lambda c: c["choices"][0]["message"].update(thinking="hmm"),
        lambda c: c["choices"][0].update(stop_reason="end_turn"),
    ],
)
def test_a_field_the_reply_models_do_not_have_cannot_be_built(field):
    completion = {**COMPLETION, "choices": [{**COMPLETION["choices"][0]}]}
    completion["choices"][0]["message"] = dict(COMPLETION["choices"][0]["message"])
    field(completion)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        sent(ChatCompletion, completion)


def test_a_response_and_its_events_go_through_their_own_models(fake: FakeOpenAI):
    fake.script(Reply(text="It is noon."))
    body = post(fake, "responses", {"model": "gpt-4o", "input": "hi"}).json()
    assert sent(Response, body) == body

    with pytest.raises(ValidationError, match="store"):
        sent(Response, {**body, "store": True})
    done = {"type": "response.output_text.done", "sequence_number": 3, "item_id": "msg_1"}
    done |= {"output_index": 0, "content_index": 0, "text": "hi", "logprobs": []}
    assert event(done) == done
    with pytest.raises(ValidationError, match="annotations"):
        event({**done, "annotations": []})
