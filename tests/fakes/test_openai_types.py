"""The fake OpenAI server holds requests and its own answers to the `openai` package's types."""

from __future__ import annotations

import openai
import pytest
from pydantic import ValidationError

from tests.fakes import openai_server, openai_types
from tests.fakes.conftest import USER, raw_post
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse
from tests.fakes.openai_types import ChatCompletion, Response, event, sent

NOW = {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}


def test_the_types_are_those_of_the_installed_package():
    for module in (openai_types, openai_server):
        assert f"version {openai.__version__} " in " ".join((module.__doc__ or "").split())


async def test_an_unknown_argument_of_a_chat_completion_is_refused(
    fake_openai: FakeOpenAI, openai_client: openai.AsyncOpenAI
):
    fake_openai.script("It is noon.")
    with pytest.raises(openai.BadRequestError) as refused:
        await openai_client.chat.completions.create(
            model="gpt-4o", messages=[USER], extra_body={"temprature": 0.2}
        )
    assert refused.value.body == {
        "message": "Unrecognized request argument supplied: temprature",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert fake_openai.pending == 1  # a refused request takes no step


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
def test_what_the_types_do_not_have_is_refused(fake_openai, path, body, message, param, code):
    fake_openai.script("never sent")
    answer = raw_post(fake_openai, path, body)

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["message"], error["param"], error["code"]) == (message, param, code)
    assert error["type"] == "invalid_request_error"
    assert fake_openai.pending == 1


def test_what_the_bot_sends_passes(fake_openai: FakeOpenAI):
    fake_openai.script(ToolUse("now"), "It is noon.")
    chat = {"model": "gpt-4o", "messages": [USER], "tools": [NOW], "stream": True}
    chat["stream_options"] = {"include_usage": True}
    call = {"type": "function", "name": "now", "parameters": {"type": "object"}, "strict": False}
    responses = {"model": "gpt-4o", "input": [USER], "tools": [call], "store": False}

    assert raw_post(fake_openai, "chat/completions", chat).status_code == 200
    assert raw_post(fake_openai, "responses", responses).status_code == 200


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


def test_a_response_and_its_events_go_through_their_own_models(fake_openai: FakeOpenAI):
    fake_openai.script(Reply(text="It is noon."))
    body = raw_post(fake_openai, "responses", {"model": "gpt-4o", "input": "hi"}).json()
    assert sent(Response, body) == body

    with pytest.raises(ValidationError, match="store"):
        sent(Response, {**body, "store": True})
    done = {"type": "response.output_text.done", "sequence_number": 3, "item_id": "msg_1"}
    done |= {"output_index": 0, "content_index": 0, "text": "hi", "logprobs": []}
    assert event(done) == done
    with pytest.raises(ValidationError, match="annotations"):
        event({**done, "annotations": []})
