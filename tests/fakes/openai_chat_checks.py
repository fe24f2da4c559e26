"""The fake OpenAI server's checks of a Chat Completions request, with the real API's texts."""

from __future__ import annotations

from typing import Any

from tests.fakes.openai_checks import (
    DETAILS,
    check_image_url,
    check_tool_choice,
    validate_model,
    validate_name,
    validate_parameters,
)
from tests.fakes.openai_errors import (
    ApiError,
    empty_array,
    invalid_type,
    invalid_value,
    missing,
    require,
    require_str,
)

_CHAT_ROLES = ["system", "assistant", "user", "function", "tool", "developer"]
_CHAT_PART_TYPES = ["text", "image_url", "input_audio", "file"]


def _validate_chat_content(msg: dict[str, Any], p: str, role: str, required: bool) -> None:
    if "content" not in msg or msg["content"] is None:
        if required:
            raise missing(f"{p}.content")
        return
    content = msg["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid_type(f"{p}.content", "one of a string or array of objects", content)
    if role in ("system", "developer", "tool"):
        allowed = ["text"]
    elif role == "assistant":
        allowed = ["text", "refusal"]
    else:
        allowed = _CHAT_PART_TYPES
    for j, part in enumerate(content):
        pp = f"{p}.content[{j}]"
        if not isinstance(part, dict):
            raise invalid_type(pp, "an object", part)
        ptype = require(part, "type", f"{pp}.type")
        if ptype not in allowed:
            raise invalid_value(f"{pp}.type", ptype, allowed)
        if ptype == "text":
            require_str(part, "text", f"{pp}.text")
        if ptype == "image_url":
            image = require(part, "image_url", f"{pp}.image_url")
            if not isinstance(image, dict):
                raise invalid_type(f"{pp}.image_url", "an object", image)
            check_image_url(require_str(image, "url", f"{pp}.image_url.url"), pp)
            if image.get("detail") is not None and image["detail"] not in DETAILS:
                raise invalid_value(f"{pp}.image_url.detail", image["detail"], DETAILS)


def validate_chat(body: dict[str, Any]) -> None:
    validate_model(body)
    if "messages" not in body or body["messages"] is None:
        raise missing("messages")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise invalid_type("messages", "an array", messages)
    if not messages:
        raise empty_array("messages")

    pending: dict[str, int] = {}  # tool call ids of the last assistant message awaiting results
    pending_from = -1
    seen_calls: dict[str, int] = {}
    answered: dict[str, int] = {}

    def unanswered() -> ApiError:
        return ApiError(
            400,
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(pending),
            param=f"messages.[{pending_from}].role",
        )

    for i, msg in enumerate(messages):
        p = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise invalid_type(p, "an object", msg)
        role = require(msg, "role", f"{p}.role")
        if role not in _CHAT_ROLES:
            raise invalid_value(f"{p}.role", role, _CHAT_ROLES)
        if role != "tool" and pending:
            raise unanswered()

        if role == "tool":
            _validate_chat_content(msg, p, role, required=True)
            call_id = require_str(msg, "tool_call_id", f"{p}.tool_call_id")
            if call_id in answered:
                raise ApiError(
                    400,
                    f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', "
                    f"in messages[{answered[call_id]}] and messages[{i}].",
                    param=f"messages.[{i}].tool_call_id",
                )
            if call_id not in pending:
                raise ApiError(
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
                raise ApiError(
                    400,
                    "Invalid value for 'content': expected a string, got null.",
                    param=f"messages.[{i}].content",
                )
        elif role == "function":
            require_str(msg, "name", f"{p}.name")
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
        raise invalid_type(f"{p}.tool_calls", "an array", tool_calls)
    if not tool_calls:
        raise empty_array(f"{p}.tool_calls")
    for j, call in enumerate(tool_calls):
        cp = f"{p}.tool_calls[{j}]"
        if not isinstance(call, dict):
            raise invalid_type(cp, "an object", call)
        call_id = require_str(call, "id", f"{cp}.id")
        ctype = require(call, "type", f"{cp}.type")
        if ctype not in ("function", "custom"):
            raise invalid_value(f"{cp}.type", ctype, ["function", "custom"])
        if ctype == "function":
            fn = require(call, "function", f"{cp}.function")
            if not isinstance(fn, dict):
                raise invalid_type(f"{cp}.function", "an object", fn)
            require_str(fn, "name", f"{cp}.function.name")
            require_str(fn, "arguments", f"{cp}.function.arguments")
        if call_id in seen_calls:
            raise ApiError(
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
            raise invalid_type("tools", "an array", tools)
        if not tools:
            raise empty_array("tools")
        for i, tool in enumerate(tools):
            tp = f"tools[{i}]"
            if not isinstance(tool, dict):
                raise invalid_type(tp, "an object", tool)
            ttype = require(tool, "type", f"{tp}.type")
            if ttype not in ("function", "custom"):
                raise invalid_value(f"{tp}.type", ttype, ["function", "custom"])
            if ttype == "custom":
                custom = require(tool, "custom", f"{tp}.custom")
                validate_name(require(custom, "name", f"{tp}.custom.name"), f"{tp}.custom.name")
                continue
            fn = require(tool, "function", f"{tp}.function")
            if not isinstance(fn, dict):
                raise invalid_type(f"{tp}.function", "an object", fn)
            name = validate_name(require(fn, "name", f"{tp}.function.name"), f"{tp}.function.name")
            if fn.get("description") is not None and not isinstance(fn["description"], str):
                raise invalid_type(f"{tp}.function.description", "a string", fn["description"])
            validate_parameters(
                name, fn.get("parameters"), f"{tp}.function.parameters", bool(fn.get("strict"))
            )
    has_tools = bool(tools)
    for key in ("tool_choice", "parallel_tool_calls"):
        if body.get(key) is not None and not has_tools:
            raise ApiError(
                400,
                f"Invalid value for '{key}': '{key}' is only allowed when 'tools' are specified.",
                param=key,
            )
    check_tool_choice(body.get("tool_choice"), "chat")
