"""The fake OpenAI server's checks of a Responses request's input and tools, with the real
API's texts."""

from __future__ import annotations

from typing import Any

from tests.fakes.openai_checks import (
    DETAILS,
    check_image_url,
    check_tool_choice,
    validate_name,
    validate_parameters,
)
from tests.fakes.openai_errors import (
    ApiError,
    invalid_type,
    invalid_value,
    missing,
    require,
    require_str,
)

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


def validate_responses_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise invalid_type("tools", "an array", tools)
    for i, tool in enumerate(tools):
        tp = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise invalid_type(tp, "an object", tool)
        ttype = require(tool, "type", f"{tp}.type")
        if ttype not in _RESPONSES_TOOL_TYPES:
            raise invalid_value(f"{tp}.type", ttype, _RESPONSES_TOOL_TYPES)
        if ttype not in ("function", "custom"):
            continue
        name = validate_name(require(tool, "name", f"{tp}.name"), f"{tp}.name")
        if ttype == "custom":
            continue
        if tool.get("description") is not None and not isinstance(tool["description"], str):
            raise invalid_type(f"{tp}.description", "a string", tool["description"])
        validate_parameters(
            name, tool.get("parameters"), f"{tp}.parameters", tool.get("strict") is True
        )
    check_tool_choice(body.get("tool_choice"), "responses")


def _validate_responses_message(item: dict[str, Any], p: str) -> None:
    role = require(item, "role", f"{p}.role")
    if role not in _RESPONSES_ROLES:
        raise invalid_value(f"{p}.role", role, _RESPONSES_ROLES)
    content = require(item, "content", f"{p}.content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid_type(f"{p}.content", "one of a string or array of input items", content)
    allowed = _OUTPUT_PART_TYPES if role == "assistant" else _INPUT_PART_TYPES
    for j, part in enumerate(content):
        pp = f"{p}.content[{j}]"
        if not isinstance(part, dict):
            raise invalid_type(pp, "an object", part)
        ptype = require(part, "type", f"{pp}.type")
        if ptype not in allowed:
            raise invalid_value(pp, ptype, allowed)
        if ptype in ("input_text", "output_text"):
            require_str(part, "text", f"{pp}.text")
        if ptype == "input_image":
            detail = require(part, "detail", f"{pp}.detail")
            if detail not in DETAILS:
                raise invalid_value(f"{pp}.detail", detail, DETAILS)
            if part.get("image_url") is None and part.get("file_id") is None:
                raise missing(f"{pp}.image_url")
            if part.get("image_url") is not None:
                check_image_url(require_str(part, "image_url", f"{pp}.image_url"), pp)


def validate_responses_input(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate `input`; return it as a list of items."""
    if "input" not in body or body["input"] is None:
        if body.get("previous_response_id") or body.get("prompt") or body.get("conversation"):
            return []
        raise missing("input")
    raw = body["input"]
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise invalid_type("input", "one of a string or array of input items", raw)
    items: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for i, item in enumerate(raw):
        p = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid_type(p, "an object", item)
        itype = item.get("type")
        if itype is None:
            if "role" not in item:
                raise missing(f"{p}.type")
            itype = "message"
        if itype not in _INPUT_ITEM_TYPES:
            raise invalid_value(f"{p}.type", itype, _INPUT_ITEM_TYPES)
        item_id = item.get("id")
        if item_id is not None:
            if not isinstance(item_id, str):
                raise invalid_type(f"{p}.id", "a string", item_id)
            prefix = {"message": "msg", "function_call": "fc", "reasoning": "rs"}.get(itype)
            if prefix and not item_id.startswith(prefix):
                raise ApiError(
                    400,
                    f"Invalid '{p}.id': '{item_id}'. Expected an ID that begins with '{prefix}'.",
                    param=f"{p}.id",
                    code="invalid_value",
                )
            if item_id in seen_ids:
                raise ApiError(
                    400,
                    f"Duplicate item found with id {item_id}. Remove duplicate items from your "
                    "input and try again.",
                    param="input",
                )
            seen_ids.add(item_id)
        if itype == "message":
            _validate_responses_message(item, p)
        elif itype == "function_call":
            require_str(item, "call_id", f"{p}.call_id")
            require_str(item, "name", f"{p}.name")
            require_str(item, "arguments", f"{p}.arguments")
        elif itype == "function_call_output":
            require_str(item, "call_id", f"{p}.call_id")
            output = require(item, "output", f"{p}.output")
            if not isinstance(output, str | list):
                raise invalid_type(f"{p}.output", "one of a string or array", output)
        items.append({**item, "type": itype})
    return items


def check_function_call_pairs(items: list[dict[str, Any]]) -> None:
    calls: set[str] = set()
    for item in items:
        if item["type"] == "function_call":
            calls.add(item["call_id"])
        elif item["type"] == "function_call_output" and item["call_id"] not in calls:
            raise ApiError(
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
            raise ApiError(
                400, f"No tool output found for function call {item['call_id']}.", param="input"
            )
