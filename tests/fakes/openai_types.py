"""The `openai` package's own request and reply types, made strict, for the fake OpenAI server.

The types are those of the installed `openai` package, version 3.57.0 (test_openai_types.py
fails once another version is installed, so that the fake is looked at again).

A request's body is validated against the package's TypedDict params of its endpoint
(``CompletionCreateParamsStreaming``/``NonStreaming`` of chat.completion_create_params,
``ResponseCreateParamsStreaming``/``NonStreaming`` of responses.response_create_params), and
its first mismatch answered as the real API answers it: a 400 naming the parameter. The
fake's own answers go through the package's reply models (``ChatCompletion``,
``ChatCompletionChunk``, ``Response``, each Responses stream event's type) and are sent as they
dump (``exclude_unset``: the nulls the fake sets are sent, nothing else is added), so a field
those models do not have cannot be sent.

pydantic lets a TypedDict or a model refuse unknown keys only by its own config, which the
package does not set (its models even allow extra fields). So each type's pydantic core schema
is taken and every TypedDict and model in it set to forbid extra keys; the package's
``Iterable[...]`` fields, which pydantic would check only lazily while they are iterated, are
checked as lists.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from functools import cache
from typing import Any, get_args

from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, SchemaValidator

from tests.fakes.openai_errors import ApiError, invalid_type, invalid_value, missing

__all__ = ["ChatCompletion", "ChatCompletionChunk", "Response", "check_request", "event", "sent"]

#: the params of a request, by (endpoint, whether it streams)
PARAMS: dict[tuple[str, bool], Any] = {
    ("chat", False): CompletionCreateParamsNonStreaming,
    ("chat", True): CompletionCreateParamsStreaming,
    ("responses", False): ResponseCreateParamsNonStreaming,
    ("responses", True): ResponseCreateParamsStreaming,
}
#: each Responses stream event's model, by its ``type``
EVENTS: dict[str, type[BaseModel]] = {
    get_args(model.model_fields["type"].annotation)[0]: model
    for model in get_args(get_args(ResponseStreamEvent)[0])
}


def _forbid_extras(schema: Any) -> None:
    """Make a pydantic core schema refuse unknown keys at every depth (in place)."""
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("typed-dict", "model-fields"):
            schema["extra_behavior"] = "forbid"
        elif kind == "model":
            schema.setdefault("config", {})["extra_fields_behavior"] = "forbid"
        elif kind == "generator":  # Iterable[...]: checked only as it is iterated
            schema["type"] = "list"
        for value in schema.values():
            _forbid_extras(value)
    elif isinstance(schema, list):
        for value in schema:
            _forbid_extras(value)


@cache
def strict_validator(type_: Any) -> SchemaValidator:
    """pydantic's validator of ``type_``, refusing every key the type does not have."""
    adapter = TypeAdapter(type_)
    adapter.rebuild(force=True)  # the package's models defer building their schema
    schema = copy.deepcopy(adapter.core_schema)
    _forbid_extras(schema)
    return SchemaValidator(schema)  # type: ignore[arg-type]


def sent(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as the real API sends it: through the package's ``model``, which must have
    every field of it (a pydantic ValidationError says which it has not)."""
    built = strict_validator(model).validate_python(data)
    return built.model_dump(mode="json", exclude_unset=True)


def event(data: dict[str, Any]) -> dict[str, Any]:
    """A Responses stream event as sent, through the model of its ``type``."""
    return sent(EVENTS[data["type"]], data)


def check_request(api: str, body: dict[str, Any]) -> None:
    """Refuse (400) a body the package's params of ``api`` do not describe."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):  # it picks the params: checked first
        raise invalid_type("stream", "a boolean", stream)
    try:
        strict_validator(PARAMS[api, stream is True]).validate_python(body, strict=True)
    except ValidationError as exc:
        raise _refusal(api, body, exc.errors()) from None


#: which mismatch is answered first, when there are several
_RANK = {"extra_forbidden": 0, "missing": 1, "literal_error": 2}
#: what a pydantic type error expected, in the API's words
_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a decimal",
    "bool_type": "a boolean",
    "list_type": "an array",
    "is_instance_of": "an array",
    "dict_type": "an object",
}


@dataclass(frozen=True)
class _Mismatch:
    """One of pydantic's errors, placed in the body."""

    error: ErrorDetails
    #: the keys and indexes of its place in the body
    steps: tuple[str | int, ...]
    #: the positions in its ``loc`` of the names pydantic gives a union's branches
    branches: frozenset[int]

    @property
    def kind(self) -> str:
        return self.error["type"]

    @property
    def loc(self) -> tuple[str | int, ...]:
        return tuple(self.error["loc"])

    def under(self, prefix: tuple[str | int, ...]) -> bool:
        return self.loc[: len(prefix)] == prefix


def _refusal(api: str, body: dict[str, Any], errors: list[ErrorDetails]) -> ApiError:
    """The API's answer to the most telling of pydantic's ``errors``."""
    found = [_placed(body, e) for e in errors]
    kept = _on_branches_meant(found)
    first = min(kept, key=lambda m: _RANK.get(m.kind, len(_RANK)))
    here = [m for m in kept if m.steps == first.steps]
    param = _param(first.steps)
    value = first.error["input"]
    if first.kind == "extra_forbidden" and api == "chat" and len(first.steps) == 1:
        return ApiError(400, f"Unrecognized request argument supplied: {param}")
    if first.kind == "extra_forbidden":
        return ApiError(
            400, f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter"
        )
    if first.kind == "missing":
        return missing(param)
    if first.kind == "literal_error":
        expected = " ".join(str((m.error.get("ctx") or {}).get("expected", "")) for m in here)
        return invalid_value(param, value, dict.fromkeys(re.findall(r"'([^']*)'", expected)))
    words = sorted({_EXPECTED[m.kind] for m in here if m.kind in _EXPECTED})
    if words:
        return invalid_type(
            param, words[0] if len(words) == 1 else "one of " + " or ".join(words), value
        )
    return ApiError(
        400, f"Invalid '{param}': {first.error['msg']}.", param=param, code="invalid_value"
    )


def _on_branches_meant(found: list[_Mismatch]) -> list[_Mismatch]:
    """The mismatches on the branches of unions the body meant. A literal that does not match
    right under a branch (a message's role, an item's type) says the body meant another one;
    when no branch of a union matches its literal, that literal is the body's mistake."""
    wrong = {
        m.loc[:-1] for m in found if m.kind == "literal_error" and len(m.loc) - 2 in m.branches
    }
    unmatched: set[tuple[str | int, ...]] = set()
    for union in {w[:-1] for w in wrong}:
        branches = {
            m.loc[: len(union) + 1] for m in found if m.under(union) and len(union) in m.branches
        }
        if branches <= wrong:
            wrong -= branches
            unmatched |= branches

    def meant(m: _Mismatch) -> bool:
        if any(m.under(w) for w in wrong):
            return False
        if any(m.under(b) for b in unmatched):
            return m.kind == "literal_error" and m.loc[:-1] in unmatched
        return True

    return [m for m in found if meant(m)] or found


def _placed(body: Any, error: ErrorDetails) -> _Mismatch:
    """``error`` with its place in ``body``: the steps of its ``loc`` that are keys and
    indexes of the body, and those that name a union's branch (they are not in the body)."""
    at, steps, branches = body, [], set()
    loc = error["loc"]
    for n, step in enumerate(loc):
        last = n == len(loc) - 1
        if isinstance(step, int) and isinstance(at, list) and 0 <= step < len(at):
            at = at[step]
        elif isinstance(at, dict) and (step in at or (last and error["type"] == "missing")):
            at = at.get(step)
        else:
            branches.add(n)
            continue
        steps.append(step)
    return _Mismatch(error, tuple(steps), frozenset(branches))


def _param(steps: tuple[str | int, ...]) -> str:
    """The API's name of a place in the body: ``messages[0].content``."""
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else str(step)
    return text
