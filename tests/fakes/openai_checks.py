"""What the fake OpenAI server checks the same way on both endpoints: the model, sampling,
token budgets, tool names and schemas, tool_choice, and images."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

from tests.fakes.openai_errors import (
    ApiError,
    invalid_type,
    invalid_value,
    listing,
    require,
    require_str,
)

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


def validate_model(body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is None or model == "":
        raise ApiError(400, "you must provide a model parameter")
    if not isinstance(model, str):
        raise invalid_type("model", "a string", model)


REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"]


def validate_sampling(body: dict[str, Any], api: str) -> None:
    """temperature (both), reasoning_effort (chat) and reasoning.effort (responses)."""
    temperature = body.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise invalid_type("temperature", "a decimal", temperature)
        if not 0 <= temperature <= 2:
            high = temperature > 2
            side, bound = ("above maximum", "<= 2") if high else ("below minimum", ">= 0")
            raise ApiError(
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
            raise invalid_type("reasoning", "an object", reasoning)
        effort, param = (reasoning or {}).get("effort"), "reasoning.effort"
    if effort is not None and effort not in REASONING_EFFORTS:
        raise invalid_value(param, effort, REASONING_EFFORTS)
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
            raise invalid_type(param, "an integer", value)
        if value < least:
            raise ApiError(
                400,
                f"Invalid '{param}': integer below minimum value. Expected a value >= {least}, "
                f"but got {value} instead.",
                param=param,
                code="integer_below_min_value",
            )


def validate_name(name: Any, param: str) -> str:
    if not isinstance(name, str):
        raise invalid_type(param, "a string", name)
    if len(name) > 64:
        raise ApiError(
            400,
            f"Invalid '{param}': string too long. Expected a string with maximum length 64, "
            f"but got a string with length {len(name)} instead.",
            param=param,
            code="string_above_max_length",
        )
    if not _NAME_RE.match(name):
        raise ApiError(
            400,
            f"Invalid '{param}': string does not match pattern. Expected a string that matches "
            "the pattern '^[a-zA-Z0-9_-]+$'.",
            param=param,
            code="invalid_value",
        )
    return name


def validate_parameters(fn_name: str, params: Any, param: str, strict: bool) -> None:
    if params is None:
        return
    if not isinstance(params, dict):
        raise invalid_type(param, "an object", params)

    def schema_error(detail: str) -> ApiError:
        return ApiError(
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
    schema: Any, context: tuple[str, ...], schema_error: Callable[[str], ApiError]
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


def check_tool_choice(value: Any, api: str) -> None:
    if value is None:
        return
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            raise invalid_value("tool_choice", value, ["none", "auto", "required"])
        return
    if not isinstance(value, dict):
        raise invalid_type("tool_choice", "one of a string or object", value)
    if value.get("type") == "function":
        if api == "chat":
            fn = require(value, "function", "tool_choice.function")
            if not isinstance(fn, dict):
                raise invalid_type("tool_choice.function", "an object", fn)
            require_str(fn, "name", "tool_choice.function.name")
        else:
            require_str(value, "name", "tool_choice.name")


DETAILS = ["auto", "low", "high"]
IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"]
_IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


def check_image_url(url: str, param: str) -> None:
    """An image by URL, or inline as a base64 data URL of a supported type whose bytes are
    that type's (OpenAI decodes it and refuses what is not an image)."""
    if url.startswith(("https://", "http://")):
        return
    head, comma, data = url.partition(",")
    mime = head.removeprefix("data:").removesuffix(";base64")
    if not (head.startswith("data:") and head.endswith(";base64") and comma):
        raise ApiError(400, "Invalid image URL: expected a URL or a base64 data URL.", param=param)
    if mime not in IMAGE_TYPES:
        raise ApiError(
            400,
            f"Invalid MIME type. Only {listing(IMAGE_TYPES)} images are supported.",
            param=param,
            code="invalid_image_format",
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raw = b""
    if not raw.startswith(_IMAGE_MAGIC[mime]):
        raise ApiError(
            400,
            "You uploaded an unsupported image. Please make sure your image is valid.",
            param=param,
            code="invalid_image",
        )
