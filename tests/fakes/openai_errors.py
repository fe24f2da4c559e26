"""The fake OpenAI server's error answers: OpenAI-shaped bodies with the real API's texts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.fakes.openai_steps import Fail


class ApiError(Exception):
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


def fake_error(message: str) -> ApiError:
    """A 500 that reports a problem with the test's script, not with the code under test."""
    return ApiError(
        500, message, type="fake_error", code="fake_error", headers={"x-should-retry": "false"}
    )


def kind(value: Any) -> str:
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


def listing(values: Iterable[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 1:
        return "".join(quoted)
    if len(quoted) == 2:
        return f"{quoted[0]} and {quoted[1]}"
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def missing(param: str) -> ApiError:
    return ApiError(
        400,
        f"Missing required parameter: '{param}'.",
        param=param,
        code="missing_required_parameter",
    )


def invalid_type(param: str, expected: str, value: Any) -> ApiError:
    return ApiError(
        400,
        f"Invalid type for '{param}': expected {expected}, but got {kind(value)} instead.",
        param=param,
        code="invalid_type",
    )


def invalid_value(param: str, value: Any, supported: Iterable[str]) -> ApiError:
    return ApiError(
        400,
        f"Invalid value: '{value}'. Supported values are: {listing(supported)}.",
        param=param,
        code="invalid_value",
    )


def empty_array(param: str) -> ApiError:
    return ApiError(
        400,
        f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        param=param,
        code="empty_array",
    )


def require(obj: dict[str, Any], key: str, param: str) -> Any:
    if key not in obj or obj[key] is None:
        raise missing(param)
    return obj[key]


def require_str(obj: dict[str, Any], key: str, param: str) -> str:
    value = require(obj, key, param)
    if not isinstance(value, str):
        raise invalid_type(param, "a string", value)
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


def fail_to_error(fail: Fail, api: str) -> ApiError:
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
    return ApiError(
        fail.status, message, type=type_, param=param, code=fail.code, headers=fail.headers
    )
