"""A strict fake of the OpenAI HTTP API (Chat Completions and Responses), for tests.

It is reached by the real `openai` client over real HTTP, validates requests the way the real API
does (answering 400 with the real error texts), and answers with scripted steps:

    fake = FakeOpenAI(api_key="test-key")
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test-key")
    fake.script(Reply(tool_calls=[ToolUse("now", {})]), Reply(text="It is noon."))
    ...
    assert fake.requests[1].api == "chat"
    fake.stop()

Steps are consumed one per *accepted* request: a request the fake rejects (401/400/404) does not
consume a step. A step is a Reply, a Fail, a Hang, a Raw (a 200 whose body is given verbatim:
what a broken server sends), a plain str (short for Reply(text=...)), a ToolUse (short for
Reply(tool_calls=[...])), or a callable `Request -> step` (sync or async; one returning None
means "no reply", like an empty queue). When the queue is empty, `fake.responder` is asked;
without one the fake answers 500 "fake: no scripted reply".

A Reply with `reasoning` text makes a reasoning model (gpt-5, o-series) start its Responses
output with a reasoning item; tests/fakes/openai_reasoning.py holds the rules the real API
enforces for those items on the way back.

`fake.apis` (default {"chat", "responses"}) are the endpoints served: take one out and its path
answers 404 `{"detail": "Not Found"}`, as a server without that API does (vLLM, LiteLLM).

Diagnostics that point at a mistake in the test rather than in the code under test (no scripted
reply, tool calls scripted while tools are disabled, ...) are 500s whose message starts with
"fake:" and which carry `x-should-retry: false`, so the client does not retry them.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import math
import re
import secrets
import string
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, StreamingResponse
from starlette.responses import Response as HttpResponse
from starlette.routing import Route

from tests.fakes.openai_reasoning import Reasoning
from tests.fakes.serve import ServedApp, StopsOnExit, serve_in_thread

__all__ = ["Fail", "FakeOpenAI", "Hang", "Raw", "Reply", "Request", "ToolUse"]

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"

# --------------------------------------------------------------------------------------------
# Script steps


@dataclass(frozen=True)
class ToolUse:
    """One tool call the fake model makes. `arguments` given as a str are sent verbatim."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    call_id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


_FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")


@dataclass
class Reply:
    """What the fake model answers. finish_reason defaults to "tool_calls" / "stop"."""

    text: str | None = None
    tool_calls: list[ToolUse] = field(default_factory=list)
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None  # (prompt/input tokens, completion/output tokens)
    #: what a reasoning model thought first: on the Responses API its output starts with a
    #: reasoning item (see tests/fakes/openai_reasoning.py); the text itself is never sent
    reasoning: str | None = None

    def __post_init__(self) -> None:
        self.tool_calls = list(self.tool_calls)
        for call in self.tool_calls:
            if not isinstance(call, ToolUse):
                raise TypeError(f"Reply.tool_calls takes ToolUse items, not {call!r}")
        if self.finish_reason is not None and self.finish_reason not in _FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {_FINISH_REASONS}")

    @property
    def effective_finish_reason(self) -> str:
        if self.finish_reason:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


@dataclass
class Fail:
    """Answer with an HTTP error and an OpenAI-shaped error body."""

    status: int
    message: str | None = None
    code: str | None = None
    type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    param: str | None = None


@dataclass(frozen=True)
class Hang:
    """Wait `seconds`, then answer 500 (for client timeouts)."""

    seconds: float


@dataclass(frozen=True)
class Raw:
    """Answer 200 with exactly this, however wrong: ``body`` as JSON (any value: a completion
    without ``choices``, a list, ...) or, for a streamed request, ``events``: each one ``data:``
    line of the event stream (a str verbatim, anything else as JSON), then ``[DONE]`` for chat."""

    body: Any = None
    events: tuple[Any, ...] = ()


Step = Reply | Fail | Hang | Raw | ToolUse | str | Callable[..., Any]

# --------------------------------------------------------------------------------------------
# Recorded requests


@dataclass
class Request:
    """A request the fake received (accepted or not)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    status: int | None = None  # what the fake answered
    error: str | None = None  # the error message it answered with, if any
    method: str = "POST"
    #: when it arrived (time.monotonic)
    at: float = field(default_factory=time.monotonic)

    @property
    def api(self) -> Literal["chat", "responses", "other"]:
        if self.path == CHAT_PATH:
            return "chat"
        if self.path == RESPONSES_PATH:
            return "responses"
        return "other"

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            if isinstance(tool, dict):
                fn = tool.get("function") if self.api == "chat" else tool
                if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                    names.append(fn["name"])
        return names


# --------------------------------------------------------------------------------------------
# Errors


class _ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})


def _fake_error(message: str) -> _ApiError:
    """A 500 that reports a problem with the test's script, not with the code under test."""
    return _ApiError(
        500, message, type="fake_error", code="fake_error", headers={"x-should-retry": "false"}
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _listing(values: Iterable[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 1:
        return "".join(quoted)
    if len(quoted) == 2:
        return f"{quoted[0]} and {quoted[1]}"
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def _missing(param: str) -> _ApiError:
    return _ApiError(
        400,
        f"Missing required parameter: '{param}'.",
        param=param,
        code="missing_required_parameter",
    )


def _invalid_type(param: str, expected: str, value: Any) -> _ApiError:
    return _ApiError(
        400,
        f"Invalid type for '{param}': expected {expected}, but got {_kind(value)} instead.",
        param=param,
        code="invalid_type",
    )


def _invalid_value(param: str, value: Any, supported: Iterable[str]) -> _ApiError:
    return _ApiError(
        400,
        f"Invalid value: '{value}'. Supported values are: {_listing(supported)}.",
        param=param,
        code="invalid_value",
    )


def _empty_array(param: str) -> _ApiError:
    return _ApiError(
        400,
        f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        param=param,
        code="empty_array",
    )


def _require(obj: dict[str, Any], key: str, param: str) -> Any:
    if key not in obj or obj[key] is None:
        raise _missing(param)
    return obj[key]


def _require_str(obj: dict[str, Any], key: str, param: str) -> str:
    value = _require(obj, key, param)
    if not isinstance(value, str):
        raise _invalid_type(param, "a string", value)
    return value


_DEFAULT_FAIL_MESSAGES = {
    400: "Bad request.",
    401: "Incorrect API key provided.",
    403: "You are not allowed to sample from this model.",
    404: "The model does not exist or you do not have access to it.",
    408: "Request timed out.",
    409: "Conflict.",
    429: "Rate limit reached for requests. Please try again in 1s.",
    500: "The server had an error while processing your request. Sorry about that!",
    502: "Bad gateway.",
    503: "The server is overloaded or not ready yet.",
}
_DEFAULT_FAIL_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "requests",
}
_CODE_MESSAGES = {
    "insufficient_quota": (
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors."
    ),
    "rate_limit_exceeded": (
        "Rate limit reached for gpt-4o in organization org-fake on tokens per min (TPM): "
        "Limit 30000, Used 30000, Requested 1000. Please try again in 2s."
    ),
    "invalid_api_key": (
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys."
    ),
    "model_not_found": "The model does not exist or you do not have access to it.",
}
_CONTEXT_MESSAGES = {
    "chat": (
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 131072 tokens. Please reduce the length of the messages."
    ),
    "responses": (
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again."
    ),
}


def _fail_to_error(fail: Fail, api: str) -> _ApiError:
    message = fail.message
    param = fail.param
    if message is None and fail.code == "context_length_exceeded":
        message = _CONTEXT_MESSAGES.get(api, _CONTEXT_MESSAGES["chat"])
        param = param or ("input" if api == "responses" else "messages")
    if message is None and fail.code in _CODE_MESSAGES:
        message = _CODE_MESSAGES[fail.code]
    if message is None:
        message = _DEFAULT_FAIL_MESSAGES.get(fail.status, f"Error {fail.status}.")
    type_ = fail.type
    if type_ is None:
        type_ = _DEFAULT_FAIL_TYPES.get(fail.status)
        if type_ is None:
            type_ = "server_error" if fail.status >= 500 else "invalid_request_error"
        if fail.code == "rate_limit_exceeded":
            type_ = "tokens"
    return _ApiError(
        fail.status, message, type=type_, param=param, code=fail.code, headers=fail.headers
    )


# --------------------------------------------------------------------------------------------
# Validation shared by both endpoints

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


def _validate_model(body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is None or model == "":
        raise _ApiError(400, "you must provide a model parameter")
    if not isinstance(model, str):
        raise _invalid_type("model", "a string", model)


REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"]


def _validate_sampling(body: dict[str, Any], api: str) -> None:
    """temperature (both), reasoning_effort (chat) and reasoning.effort (responses)."""
    temperature = body.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise _invalid_type("temperature", "a decimal", temperature)
        if not 0 <= temperature <= 2:
            high = temperature > 2
            side, bound = ("above maximum", "<= 2") if high else ("below minimum", ">= 0")
            raise _ApiError(
                400,
                f"Invalid 'temperature': decimal {side} value. Expected a value {bound}, but got "
                f"{temperature} instead.",
                param="temperature",
                code="decimal_above_max_value" if high else "decimal_below_min_value",
            )
    if api == "chat":
        effort, param = body.get("reasoning_effort"), "reasoning_effort"
    else:
        reasoning = body.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, dict):
            raise _invalid_type("reasoning", "an object", reasoning)
        effort, param = (reasoning or {}).get("effort"), "reasoning.effort"
    if effort is not None and effort not in REASONING_EFFORTS:
        raise _invalid_value(param, effort, REASONING_EFFORTS)
    _validate_output_budget(body, api)


#: the least a reply's token budget may be, by API (the Responses API's is 16)
MIN_OUTPUT_TOKENS = {"chat": 1, "responses": 16}


def _validate_output_budget(body: dict[str, Any], api: str) -> None:
    """max_completion_tokens / max_tokens (chat), max_output_tokens (responses)."""
    params = ("max_completion_tokens", "max_tokens") if api == "chat" else ("max_output_tokens",)
    least = MIN_OUTPUT_TOKENS.get(api, 1)
    for param in params:
        value = body.get(param)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid_type(param, "an integer", value)
        if value < least:
            raise _ApiError(
                400,
                f"Invalid '{param}': integer below minimum value. Expected a value >= {least}, "
                f"but got {value} instead.",
                param=param,
                code="integer_below_min_value",
            )


def _validate_name(name: Any, param: str) -> str:
    if not isinstance(name, str):
        raise _invalid_type(param, "a string", name)
    if len(name) > 64:
        raise _ApiError(
            400,
            f"Invalid '{param}': string too long. Expected a string with maximum length 64, "
            f"but got a string with length {len(name)} instead.",
            param=param,
            code="string_above_max_length",
        )
    if not _NAME_RE.match(name):
        raise _ApiError(
            400,
            f"Invalid '{param}': string does not match pattern. Expected a string that matches "
            "the pattern '^[a-zA-Z0-9_-]+$'.",
            param=param,
            code="invalid_value",
        )
    return name


def _validate_parameters(fn_name: str, params: Any, param: str, strict: bool) -> None:
    if params is None:
        return
    if not isinstance(params, dict):
        raise _invalid_type(param, "an object", params)

    def schema_error(detail: str) -> _ApiError:
        return _ApiError(
            400,
            f"Invalid schema for function '{fn_name}': {detail}",
            param=param,
            code="invalid_function_parameters",
        )

    if params.get("type") != "object":
        got = params.get("type")
        raise schema_error(
            f"""schema must be a JSON Schema of 'type: "object"', got 'type: "{got}"'."""
        )
    props = params.get("properties")
    if props is not None and not isinstance(props, dict):
        raise schema_error(f"{props!r} is not of type 'object'.")
    if strict:
        _check_strict_schema(params, (), schema_error)


def _check_strict_schema(
    schema: Any, context: tuple[str, ...], schema_error: Callable[[str], _ApiError]
) -> None:
    if not isinstance(schema, dict):
        return
    types = schema.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    if is_object:
        if schema.get("additionalProperties") is not False:
            raise schema_error(
                f"In context={context!r}, 'additionalProperties' is required to be supplied "
                "and to be false."
            )
        props = schema.get("properties") or {}
        required = schema.get("required")
        if not isinstance(required, list):
            required = []
        for key in props:
            if key not in required:
                raise schema_error(
                    f"In context={context!r}, 'required' is required to be supplied and to be "
                    f"an array including every key in properties. Missing '{key}'."
                )
        for key, sub in props.items():
            _check_strict_schema(sub, (*context, "properties", key), schema_error)
    if isinstance(schema.get("items"), dict):
        _check_strict_schema(schema["items"], (*context, "items"), schema_error)
    for combiner in ("anyOf", "allOf"):
        for n, sub in enumerate(schema.get(combiner) or []):
            _check_strict_schema(sub, (*context, combiner, str(n)), schema_error)
    for defs_key in ("$defs", "definitions"):
        for name, sub in (schema.get(defs_key) or {}).items():
            _check_strict_schema(sub, (*context, defs_key, name), schema_error)


def _check_tool_choice(value: Any, api: str) -> None:
    if value is None:
        return
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            raise _invalid_value("tool_choice", value, ["none", "auto", "required"])
        return
    if not isinstance(value, dict):
        raise _invalid_type("tool_choice", "one of a string or object", value)
    if value.get("type") == "function":
        if api == "chat":
            fn = _require(value, "function", "tool_choice.function")
            if not isinstance(fn, dict):
                raise _invalid_type("tool_choice.function", "an object", fn)
            _require_str(fn, "name", "tool_choice.function.name")
        else:
            _require_str(value, "name", "tool_choice.name")


# --------------------------------------------------------------------------------------------
# Chat Completions validation

_CHAT_ROLES = ["system", "assistant", "user", "function", "tool", "developer"]
_CHAT_PART_TYPES = ["text", "image_url", "input_audio", "file"]


def _validate_chat_content(msg: dict[str, Any], p: str, role: str, required: bool) -> None:
    if "content" not in msg or msg["content"] is None:
        if required:
            raise _missing(f"{p}.content")
        return
    content = msg["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid_type(f"{p}.content", "one of a string or array of objects", content)
    if role in ("system", "developer", "tool"):
        allowed = ["text"]
    elif role == "assistant":
        allowed = ["text", "refusal"]
    else:
        allowed = _CHAT_PART_TYPES
    for j, part in enumerate(content):
        pp = f"{p}.content[{j}]"
        if not isinstance(part, dict):
            raise _invalid_type(pp, "an object", part)
        ptype = _require(part, "type", f"{pp}.type")
        if ptype not in allowed:
            raise _invalid_value(f"{pp}.type", ptype, allowed)
        if ptype == "text":
            _require_str(part, "text", f"{pp}.text")
        if ptype == "image_url":
            image = _require(part, "image_url", f"{pp}.image_url")
            if not isinstance(image, dict):
                raise _invalid_type(f"{pp}.image_url", "an object", image)
            _check_image_url(_require_str(image, "url", f"{pp}.image_url.url"), pp)
            if image.get("detail") is not None and image["detail"] not in _DETAILS:
                raise _invalid_value(f"{pp}.image_url.detail", image["detail"], _DETAILS)


_DETAILS = ["auto", "low", "high"]
_IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"]
_IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


def _check_image_url(url: str, param: str) -> None:
    """An image by URL, or inline as a base64 data URL of a supported type whose bytes are
    that type's (OpenAI decodes it and refuses what is not an image)."""
    if url.startswith(("https://", "http://")):
        return
    head, comma, data = url.partition(",")
    mime = head.removeprefix("data:").removesuffix(";base64")
    if not (head.startswith("data:") and head.endswith(";base64") and comma):
        raise _ApiError(400, "Invalid image URL: expected a URL or a base64 data URL.", param=param)
    if mime not in _IMAGE_TYPES:
        raise _ApiError(
            400,
            f"Invalid MIME type. Only {_listing(_IMAGE_TYPES)} images are supported.",
            param=param,
            code="invalid_image_format",
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raw = b""
    if not raw.startswith(_IMAGE_MAGIC[mime]):
        raise _ApiError(
            400,
            "You uploaded an unsupported image. Please make sure your image is valid.",
            param=param,
            code="invalid_image",
        )


def _validate_chat(body: dict[str, Any]) -> None:
    _validate_model(body)
    if "messages" not in body or body["messages"] is None:
        raise _missing("messages")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _invalid_type("messages", "an array", messages)
    if not messages:
        raise _empty_array("messages")

    pending: dict[str, int] = {}  # tool call ids of the last assistant message awaiting results
    pending_from = -1
    seen_calls: dict[str, int] = {}
    answered: dict[str, int] = {}

    def unanswered() -> _ApiError:
        return _ApiError(
            400,
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(pending),
            param=f"messages.[{pending_from}].role",
        )

    for i, msg in enumerate(messages):
        p = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise _invalid_type(p, "an object", msg)
        role = _require(msg, "role", f"{p}.role")
        if role not in _CHAT_ROLES:
            raise _invalid_value(f"{p}.role", role, _CHAT_ROLES)
        if role != "tool" and pending:
            raise unanswered()

        if role == "tool":
            _validate_chat_content(msg, p, role, required=True)
            call_id = _require_str(msg, "tool_call_id", f"{p}.tool_call_id")
            if call_id in answered:
                raise _ApiError(
                    400,
                    f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', "
                    f"in messages[{answered[call_id]}] and messages[{i}].",
                    param=f"messages.[{i}].tool_call_id",
                )
            if call_id not in pending:
                raise _ApiError(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{i}].role",
                )
            del pending[call_id]
            answered[call_id] = i
        elif role == "assistant":
            tool_calls = msg.get("tool_calls")
            if tool_calls is not None:
                _validate_chat_tool_calls(tool_calls, p, i, seen_calls, pending)
                pending_from = i
            _validate_chat_content(msg, p, role, required=False)
            if msg.get("content") is None and not tool_calls and not msg.get("function_call"):
                raise _ApiError(
                    400,
                    "Invalid value for 'content': expected a string, got null.",
                    param=f"messages.[{i}].content",
                )
        elif role == "function":
            _require_str(msg, "name", f"{p}.name")
            _validate_chat_content(msg, p, role, required=True)
        else:
            _validate_chat_content(msg, p, role, required=True)

    if pending:
        raise unanswered()

    _validate_chat_tools(body)


def _validate_chat_tool_calls(
    tool_calls: Any, p: str, i: int, seen_calls: dict[str, int], pending: dict[str, int]
) -> None:
    if not isinstance(tool_calls, list):
        raise _invalid_type(f"{p}.tool_calls", "an array", tool_calls)
    if not tool_calls:
        raise _empty_array(f"{p}.tool_calls")
    for j, call in enumerate(tool_calls):
        cp = f"{p}.tool_calls[{j}]"
        if not isinstance(call, dict):
            raise _invalid_type(cp, "an object", call)
        call_id = _require_str(call, "id", f"{cp}.id")
        ctype = _require(call, "type", f"{cp}.type")
        if ctype not in ("function", "custom"):
            raise _invalid_value(f"{cp}.type", ctype, ["function", "custom"])
        if ctype == "function":
            fn = _require(call, "function", f"{cp}.function")
            if not isinstance(fn, dict):
                raise _invalid_type(f"{cp}.function", "an object", fn)
            _require_str(fn, "name", f"{cp}.function.name")
            _require_str(fn, "arguments", f"{cp}.function.arguments")
        if call_id in seen_calls:
            raise _ApiError(
                400,
                f"Invalid parameter: Duplicate value for 'tool_calls.id' of '{call_id}', "
                f"in messages[{seen_calls[call_id]}] and messages[{i}].",
                param=f"messages.[{i}].tool_calls",
            )
        seen_calls[call_id] = i
        pending[call_id] = i


def _validate_chat_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _invalid_type("tools", "an array", tools)
        if not tools:
            raise _empty_array("tools")
        for i, tool in enumerate(tools):
            tp = f"tools[{i}]"
            if not isinstance(tool, dict):
                raise _invalid_type(tp, "an object", tool)
            ttype = _require(tool, "type", f"{tp}.type")
            if ttype not in ("function", "custom"):
                raise _invalid_value(f"{tp}.type", ttype, ["function", "custom"])
            if ttype == "custom":
                custom = _require(tool, "custom", f"{tp}.custom")
                _validate_name(_require(custom, "name", f"{tp}.custom.name"), f"{tp}.custom.name")
                continue
            fn = _require(tool, "function", f"{tp}.function")
            if not isinstance(fn, dict):
                raise _invalid_type(f"{tp}.function", "an object", fn)
            name = _validate_name(
                _require(fn, "name", f"{tp}.function.name"), f"{tp}.function.name"
            )
            if fn.get("description") is not None and not isinstance(fn["description"], str):
                raise _invalid_type(f"{tp}.function.description", "a string", fn["description"])
            _validate_parameters(
                name, fn.get("parameters"), f"{tp}.function.parameters", bool(fn.get("strict"))
            )
    has_tools = bool(tools)
    for key in ("tool_choice", "parallel_tool_calls"):
        if body.get(key) is not None and not has_tools:
            raise _ApiError(
                400,
                f"Invalid value for '{key}': '{key}' is only allowed when 'tools' are specified.",
                param=key,
            )
    _check_tool_choice(body.get("tool_choice"), "chat")


# --------------------------------------------------------------------------------------------
# Responses validation

_RESPONSES_ROLES = ["user", "assistant", "system", "developer"]
_INPUT_PART_TYPES = ["input_text", "input_image", "input_file"]
_OUTPUT_PART_TYPES = ["output_text", "refusal"]
_INPUT_ITEM_TYPES = [
    "message",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "web_search_call",
    "function_call",
    "function_call_output",
    "reasoning",
    "compaction",
    "image_generation_call",
    "code_interpreter_call",
    "local_shell_call",
    "local_shell_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_call",
    "custom_tool_call_output",
    "custom_tool_call",
    "item_reference",
]
_RESPONSES_TOOL_TYPES = [
    "function",
    "file_search",
    "computer_use_preview",
    "computer",
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
    "mcp",
    "code_interpreter",
    "image_generation",
    "local_shell",
    "shell",
    "custom",
    "apply_patch",
]


def _validate_responses_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _invalid_type("tools", "an array", tools)
    for i, tool in enumerate(tools):
        tp = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise _invalid_type(tp, "an object", tool)
        ttype = _require(tool, "type", f"{tp}.type")
        if ttype not in _RESPONSES_TOOL_TYPES:
            raise _invalid_value(f"{tp}.type", ttype, _RESPONSES_TOOL_TYPES)
        if ttype not in ("function", "custom"):
            continue
        name = _validate_name(_require(tool, "name", f"{tp}.name"), f"{tp}.name")
        if ttype == "custom":
            continue
        if tool.get("description") is not None and not isinstance(tool["description"], str):
            raise _invalid_type(f"{tp}.description", "a string", tool["description"])
        _validate_parameters(
            name, tool.get("parameters"), f"{tp}.parameters", tool.get("strict") is True
        )
    _check_tool_choice(body.get("tool_choice"), "responses")


def _validate_responses_message(item: dict[str, Any], p: str) -> None:
    role = _require(item, "role", f"{p}.role")
    if role not in _RESPONSES_ROLES:
        raise _invalid_value(f"{p}.role", role, _RESPONSES_ROLES)
    content = _require(item, "content", f"{p}.content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid_type(f"{p}.content", "one of a string or array of input items", content)
    allowed = _OUTPUT_PART_TYPES if role == "assistant" else _INPUT_PART_TYPES
    for j, part in enumerate(content):
        pp = f"{p}.content[{j}]"
        if not isinstance(part, dict):
            raise _invalid_type(pp, "an object", part)
        ptype = _require(part, "type", f"{pp}.type")
        if ptype not in allowed:
            raise _invalid_value(pp, ptype, allowed)
        if ptype in ("input_text", "output_text"):
            _require_str(part, "text", f"{pp}.text")
        if ptype == "input_image":
            detail = _require(part, "detail", f"{pp}.detail")
            if detail not in _DETAILS:
                raise _invalid_value(f"{pp}.detail", detail, _DETAILS)
            if part.get("image_url") is None and part.get("file_id") is None:
                raise _missing(f"{pp}.image_url")
            if part.get("image_url") is not None:
                _check_image_url(_require_str(part, "image_url", f"{pp}.image_url"), pp)


def _validate_responses_input(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate `input`; return it as a list of items."""
    if "input" not in body or body["input"] is None:
        if body.get("previous_response_id") or body.get("prompt") or body.get("conversation"):
            return []
        raise _missing("input")
    raw = body["input"]
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise _invalid_type("input", "one of a string or array of input items", raw)
    items: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for i, item in enumerate(raw):
        p = f"input[{i}]"
        if not isinstance(item, dict):
            raise _invalid_type(p, "an object", item)
        itype = item.get("type")
        if itype is None:
            if "role" not in item:
                raise _missing(f"{p}.type")
            itype = "message"
        if itype not in _INPUT_ITEM_TYPES:
            raise _invalid_value(f"{p}.type", itype, _INPUT_ITEM_TYPES)
        item_id = item.get("id")
        if item_id is not None:
            if not isinstance(item_id, str):
                raise _invalid_type(f"{p}.id", "a string", item_id)
            prefix = {"message": "msg", "function_call": "fc", "reasoning": "rs"}.get(itype)
            if prefix and not item_id.startswith(prefix):
                raise _ApiError(
                    400,
                    f"Invalid '{p}.id': '{item_id}'. Expected an ID that begins with '{prefix}'.",
                    param=f"{p}.id",
                    code="invalid_value",
                )
            if item_id in seen_ids:
                raise _ApiError(
                    400,
                    f"Duplicate item found with id {item_id}. Remove duplicate items from your "
                    "input and try again.",
                    param="input",
                )
            seen_ids.add(item_id)
        if itype == "message":
            _validate_responses_message(item, p)
        elif itype == "function_call":
            _require_str(item, "call_id", f"{p}.call_id")
            _require_str(item, "name", f"{p}.name")
            _require_str(item, "arguments", f"{p}.arguments")
        elif itype == "function_call_output":
            _require_str(item, "call_id", f"{p}.call_id")
            output = _require(item, "output", f"{p}.output")
            if not isinstance(output, str | list):
                raise _invalid_type(f"{p}.output", "one of a string or array", output)
        items.append({**item, "type": itype})
    return items


def _check_function_call_pairs(items: list[dict[str, Any]]) -> None:
    calls: set[str] = set()
    for item in items:
        if item["type"] == "function_call":
            calls.add(item["call_id"])
        elif item["type"] == "function_call_output" and item["call_id"] not in calls:
            raise _ApiError(
                400,
                f"No tool call found for function call output with call_id {item['call_id']}.",
                param="input",
            )
    for n, item in enumerate(items):
        if item["type"] != "function_call":
            continue
        answered = any(
            later["type"] == "function_call_output" and later["call_id"] == item["call_id"]
            for later in items[n + 1 :]
        )
        if not answered:
            raise _ApiError(
                400, f"No tool output found for function call {item['call_id']}.", param="input"
            )


# --------------------------------------------------------------------------------------------
# Building answers


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _hex_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def _pieces(text: str, n: int = 4) -> list[str]:
    """Split text into about n chunks (as a model streams it)."""
    if not text:
        return []
    size = max(1, math.ceil(len(text) / n))
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class _Call:
    call_id: str
    name: str
    arguments: str
    item_id: str


class _Answer:
    """A Reply resolved against one request: ids, arguments and usage fixed."""

    def __init__(self, reply: Reply, raw_body: bytes):
        self.reply = reply
        self.text = reply.text
        self.calls = [
            _Call(
                call_id=call.call_id or f"call_{_rand(24)}",
                name=call.name,
                arguments=call.arguments_json(),
                item_id=_hex_id("fc"),
            )
            for call in reply.tool_calls
        ]
        self.finish_reason = reply.effective_finish_reason
        if reply.usage is not None:
            self.input_tokens, self.output_tokens = reply.usage
        else:
            self.input_tokens = max(1, len(raw_body) // 4)
            self.output_tokens = max(1, len(self.text or "") // 4 + 10 * len(self.calls))
        self.created = int(time.time())


def _chat_usage(a: _Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": a.input_tokens,
        "completion_tokens": a.output_tokens,
        "total_tokens": a.input_tokens + a.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_completion(body: dict[str, Any], a: _Answer) -> dict[str, Any]:
    content = a.text if a.text is not None else (None if a.calls else "")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": [],
    }
    if a.calls:
        message["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in a.calls
        ]
    return {
        "id": f"chatcmpl-{_rand(29)}",
        "object": "chat.completion",
        "created": a.created,
        "model": body["model"],
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": a.finish_reason}
        ],
        "usage": _chat_usage(a),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _chat_chunks(body: dict[str, Any], a: _Answer) -> list[dict[str, Any]]:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base: dict[str, Any] = {
        "id": f"chatcmpl-{_rand(29)}",
        "object": "chat.completion.chunk",
        "created": a.created,
        "model": body["model"],
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**base, "choices": [choice]}

    first_content = "" if a.text is not None or not a.calls else None
    chunks = [chunk({"role": "assistant", "content": first_content, "refusal": None})]
    chunks += [chunk({"content": piece}) for piece in _pieces(a.text or "")]
    for index, c in enumerate(a.calls):
        head = {
            "index": index,
            "id": c.call_id,
            "type": "function",
            "function": {"name": c.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(c.arguments)
        ]
    chunks.append(chunk({}, a.finish_reason))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _chat_usage(a)})
    return chunks


def _echo_tools(tools: Any) -> list[dict[str, Any]]:
    echoed = []
    for tool in tools or []:
        if tool.get("type") == "function":
            echoed.append(
                {
                    "type": "function",
                    "name": tool["name"],
                    "description": tool.get("description"),
                    "parameters": tool.get("parameters"),
                    "strict": tool.get("strict", True),
                }
            )
        else:
            echoed.append(tool)
    return echoed


def _responses_output(a: _Answer, item_status: str) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if a.text is not None or not a.calls:
        output.append(
            {
                "id": _hex_id("msg"),
                "type": "message",
                "status": item_status,
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": a.text or "", "annotations": [], "logprobs": []}
                ],
            }
        )
    for c in a.calls:
        output.append(
            {
                "id": c.item_id,
                "type": "function_call",
                "status": "completed",
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
            }
        )
    return output


def _response_object(body: dict[str, Any], a: _Answer) -> dict[str, Any]:
    incomplete = None
    if a.finish_reason == "length":
        incomplete = {"reason": "max_output_tokens"}
    elif a.finish_reason == "content_filter":
        incomplete = {"reason": "content_filter"}
    status = "incomplete" if incomplete else "completed"
    return {
        "id": _hex_id("resp"),
        "object": "response",
        "created_at": a.created,
        "status": status,
        "background": False,
        "completed_at": a.created if status == "completed" else None,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "model": body["model"],
        "output": _responses_output(a, "incomplete" if incomplete else "completed"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": {"effort": None, "summary": None, **(body.get("reasoning") or {})},
        "safety_identifier": body.get("safety_identifier"),
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": _echo_tools(body.get("tools")),
        "top_logprobs": body.get("top_logprobs", 0),
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": {
            "input_tokens": a.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": a.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": a.input_tokens + a.output_tokens,
        },
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    def emit(type_: str, **fields: Any) -> None:
        events.append({"type": type_, "sequence_number": len(events), **fields})

    pending = {
        **response,
        "status": "in_progress",
        "completed_at": None,
        "incomplete_details": None,
        "output": [],
        "usage": None,
    }
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "reasoning":
            bare = {k: v for k, v in item.items() if k != "encrypted_content"}
            emit("response.output_item.added", output_index=index, item=bare)
        elif item["type"] == "message":
            part = item["content"][0]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            empty_part = {**part, "text": ""}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=empty_part,
            )
            for piece in _pieces(part["text"]):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
        else:
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in _pieces(item["arguments"]):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=index, item=item)
    final = "response.completed" if response["status"] == "completed" else "response.incomplete"
    emit(final, response=response)
    return events


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


# --------------------------------------------------------------------------------------------
# The fake


def _mask_key(key: str) -> str:
    if len(key) <= 8:
        return key
    return key[:3] + "*" * (len(key) - 7) + key[-4:]


class FakeOpenAI(StopsOnExit):
    """A strict fake OpenAI server on 127.0.0.1; starts serving on construction."""

    def __init__(self, api_key: str = "test-key", host: str = "127.0.0.1"):
        self.api_key = api_key
        self.responder: Callable[[Request], Any] | None = None
        self.latency: float = 0.0
        #: seconds between the frames of a streamed answer (a model that writes slowly)
        self.frame_interval: float = 0.0
        self.requests: list[Request] = []
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._stored: dict[str, list[dict[str, Any]]] = {}
        self._reasoning = Reasoning(_ApiError)
        #: the endpoints served; another answers 404 as a server without that API does
        self.apis: set[str] = {"chat", "responses"}
        app = Starlette(
            routes=[
                Route(
                    "/{path:path}",
                    self._handle,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                )
            ]
        )
        self._served: ServedApp = serve_in_thread(app, host=host)
        self.url = self._served.url
        self.base_url = f"{self.url}/v1"

    # ---- test-facing API

    def script(self, *steps: Step) -> FakeOpenAI:
        """Queue steps; each accepted request consumes one."""
        for step in steps:
            _check_step(step)
        with self._lock:
            self._queue.extend(steps)
        return self

    @property
    def pending(self) -> int:
        """How many scripted steps have not been consumed yet."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self._stored.clear()
        self._reasoning.clear()
        self.responder = None
        self.latency = self.frame_interval = 0.0
        self.apis = {"chat", "responses"}

    def stop(self) -> None:
        self._stopping.set()
        self._served.stop()

    def __repr__(self) -> str:
        return f"FakeOpenAI({self.base_url!r}, pending={self.pending})"

    # ---- serving

    async def _handle(self, http: HttpRequest) -> HttpResponse:
        raw = await http.body()
        record = Request(
            path=http.url.path,
            body={},
            headers={k.lower(): v for k, v in http.headers.items()},
            method=http.method,
        )
        parsed: Any = None
        parse_failed = False
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parse_failed = True
        if isinstance(parsed, dict):
            record.body = parsed
        elif parsed is not None:
            parse_failed = True
        with self._lock:
            self.requests.append(record)
        try:
            return await self._answer(http, record, raw, parse_failed)
        except _ApiError as err:
            return self._error(record, err)
        except Exception as exc:
            return self._error(record, _fake_error(f"fake: internal error: {exc!r}"))

    def _error(self, record: Request, err: _ApiError) -> JSONResponse:
        record.status = err.status
        record.error = err.message
        body = {
            "error": {
                "message": err.message,
                "type": err.type,
                "param": err.param,
                "code": err.code,
            }
        }
        headers = {"x-request-id": f"req_{secrets.token_hex(16)}", **err.headers}
        return JSONResponse(body, status_code=err.status, headers=headers)

    def _check_auth(self, headers: dict[str, str]) -> None:
        auth = headers.get("authorization")
        if not auth:
            raise _ApiError(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), "
                "or as the password field (with blank username) if you're accessing the API "
                "from your browser and are prompted for a username. You can obtain an API key "
                "from https://platform.openai.com/account/api-keys.",
            )
        scheme, _, key = auth.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or key != self.api_key:
            raise _ApiError(
                401,
                f"Incorrect API key provided: {_mask_key(key or auth)}. You can find your API "
                "key at https://platform.openai.com/account/api-keys.",
                code="invalid_api_key",
            )

    async def _answer(
        self, http: HttpRequest, record: Request, raw: bytes, parse_failed: bool
    ) -> HttpResponse:
        if record.api in ("chat", "responses") and record.api not in self.apis:
            record.status = 404
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        self._check_auth(record.headers)
        if http.method != "POST" or record.api == "other":
            raise _ApiError(404, f"Invalid URL ({http.method} {record.path})")
        if parse_failed or not raw:
            raise _ApiError(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you "
                "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
                "but what was sent was not valid JSON. If you have trouble figuring out how to "
                "fix this, please contact us through our help center at help.openai.com.)",
            )
        body = record.body
        history: list[dict[str, Any]] = []
        if record.api == "chat":
            _validate_chat(body)
        else:
            history = self._validate_responses(body)
        _validate_sampling(body, record.api)

        step = await self._next_step(record)
        if isinstance(step, Hang):
            await self._sleep(step.seconds)
            raise _ApiError(
                500,
                f"fake: Hang({step.seconds}) elapsed without the client giving up.",
                type="server_error",
            )
        if isinstance(step, Fail):
            await self._sleep(self.latency)
            raise _fail_to_error(step, record.api)
        if isinstance(step, Raw):
            await self._sleep(self.latency)
            return self._raw(record, step)

        reply: Reply = step
        self._check_reply_fits(body, reply)
        await self._sleep(self.latency)
        answer = _Answer(reply, raw)
        headers = {"x-request-id": f"req_{secrets.token_hex(16)}", "openai-processing-ms": "1"}
        record.status = 200

        if record.api == "chat":
            if body.get("stream"):
                chunks = _chat_chunks(body, answer)
                frames = [_sse(c) for c in chunks] + [b"data: [DONE]\n\n"]
                return self._stream(frames, headers)
            return JSONResponse(_chat_completion(body, answer), headers=headers)

        response = _response_object(body, answer)
        if reply.reasoning:
            response["output"] = self._reasoning.think(body, response["output"])
        if body.get("store", True) is not False:
            with self._lock:
                self._stored[response["id"]] = history + response["output"]
        if body.get("stream"):
            frames = [_sse(e, e["type"]) for e in _response_events(response)]
            return self._stream(frames, headers)
        return JSONResponse(response, headers=headers)

    def _validate_responses(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        _validate_model(body)
        previous: list[dict[str, Any]] = []
        prev_id = body.get("previous_response_id")
        if prev_id is not None:
            with self._lock:
                stored = self._stored.get(prev_id)
            if stored is None:
                raise _ApiError(
                    400,
                    f"Previous response with id '{prev_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            previous = list(stored)
        items = _validate_responses_input(body)
        self._reasoning.check_include(body, _invalid_type, _invalid_value)
        self._reasoning.check_input(body, items)
        _validate_responses_tools(body)
        history = previous + items
        _check_function_call_pairs(history)
        return history

    def _raw(self, record: Request, step: Raw) -> HttpResponse:
        record.status = 200
        headers = {"x-request-id": f"req_{secrets.token_hex(16)}"}
        if not record.stream:
            return JSONResponse(step.body, headers=headers)
        frames = [
            f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in step.events
        ]
        if record.api == "chat":
            frames.append(b"data: [DONE]\n\n")
        return self._stream(frames, headers)

    def _stream(self, frames: list[bytes], headers: dict[str, str]) -> StreamingResponse:
        pause = self.frame_interval

        async def gen() -> AsyncIterator[bytes]:
            for number, frame in enumerate(frames):
                if number and pause:
                    await asyncio.sleep(pause)
                yield frame

        return StreamingResponse(gen(), media_type="text/event-stream", headers=headers)

    async def _next_step(self, record: Request) -> Reply | Fail | Hang | Raw:
        with self._lock:
            step: Any = self._queue.popleft() if self._queue else None
        if step is None and self.responder is not None:
            step = self.responder
        for _ in range(10):
            if step is None:
                raise _fake_error("fake: no scripted reply")
            if isinstance(step, Reply | Fail | Hang | Raw):
                return step
            if isinstance(step, str):
                return Reply(text=step)
            if isinstance(step, ToolUse):
                return Reply(tool_calls=[step])
            if callable(step):
                step = step(record)
                if inspect.isawaitable(step):
                    step = await step
                continue
            raise _fake_error(f"fake: not a step: {step!r}")
        raise _fake_error("fake: step callables nested too deeply")

    @staticmethod
    def _check_reply_fits(body: dict[str, Any], reply: Reply) -> None:
        if not reply.tool_calls:
            return
        tools = body.get("tools") or []
        if not tools or body.get("tool_choice") == "none":
            raise _fake_error("fake: scripted tool call but tools are disabled")
        if len(reply.tool_calls) > 1 and body.get("parallel_tool_calls") is False:
            raise _fake_error(
                f"fake: scripted {len(reply.tool_calls)} tool calls but parallel_tool_calls "
                "is false"
            )

    async def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + max(0.0, seconds)
        while not self._stopping.is_set():
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(min(remaining, 0.05))


def _check_step(step: Any) -> None:
    if isinstance(step, Reply | Fail | Hang | Raw | ToolUse | str) or callable(step):
        return
    raise TypeError(
        f"not a step: {step!r} (expected Reply, Fail, Hang, Raw, ToolUse, str or callable)"
    )
