"""The arguments of a tool: a pydantic model from a function's hints and docstring, or a
JSON schema (an MCP server's) checked for what the model API accepts and validated with
``jsonschema``.

Both API modes send function tools non-strict (Chat Completions without ``strict``,
Responses with ``strict: false``), so strict mode's extra rules (every property required,
``additionalProperties: false`` everywhere) do not apply. What either mode refuses in any
mode, and ``parameters_for_api`` therefore repairs or rejects:

* a root that is not ``type: "object"`` (a missing root type is read as an object), or
  that is a union (``anyOf``/``oneOf``/``allOf``/``not``/``enum``) at the root;
* ``properties`` that is not an object (a missing one becomes ``{}``);
* an array without ``items`` (given ``items: {}``, any item);
* a schema that is not valid JSON Schema, or a ``$ref`` outside the document (the API
  resolves no URL, and neither does the validation here).
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any, get_type_hints

import jsonschema
import referencing
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from bot.errors import ToolError

#: the keyword-only argument through which a writing tool receives its call's marker
MARKER_ARGUMENT = "marker"

_ROOT_UNIONS = ("anyOf", "oneOf", "allOf", "not", "enum")
#: keywords whose value is one schema / a list of schemas / a map of name -> schema
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: problems named in one error result at most
_MAX_PROBLEMS = 5


class ModelArguments:
    """Arguments checked by a pydantic model built from a function's type hints."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.schema = schema

    def validate(self, raw: dict[str, Any], tool: str) -> dict[str, Any]:
        try:
            parsed = self.model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolError(f"Invalid arguments for '{tool}': {problems}.") from None
        return {k: getattr(parsed, k) for k in type(parsed).model_fields}


_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def describe_function(function: Callable[..., Any], name: str) -> tuple[str, ModelArguments]:
    """The description (docstring before ``Args:``) and the arguments from the hints."""
    doc = inspect.getdoc(function) or ""
    summary, _, args_part = doc.partition("Args:")
    arg_docs: dict[str, str] = {}
    current = None
    for line in args_part.splitlines():
        match = _ARG_LINE.match(line)
        if match:
            current = match.group(1)
            arg_docs[current] = match.group(2).strip()
        elif current and line.strip():
            arg_docs[current] += " " + line.strip()
    hints = get_type_hints(function, include_extras=True)
    fields: dict[str, Any] = {}
    for param in inspect.signature(function).parameters.values():
        if param.name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.KEYWORD_ONLY and param.name == MARKER_ARGUMENT:
            continue  # given by the registry, not by the model
        annotation = hints.get(param.name, str)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (
            annotation,
            Field(default=default, description=arg_docs.get(param.name)),
        )
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return " ".join(summary.split()), ModelArguments(model)


class SchemaRefused(ValueError):
    """The schema cannot be sent to the model API; the message says why, as what the
    schema "is" or "has"."""


def parameters_for_api(schema: Any) -> dict[str, Any]:
    """``schema`` as both API modes accept it for a function's parameters (a repaired
    copy), or SchemaRefused saying why it cannot be sent."""
    if not isinstance(schema, dict):
        raise SchemaRefused("is not a JSON object")
    fixed = copy.deepcopy(schema)
    fixed.pop("title", None)
    unions = [key for key in _ROOT_UNIONS if key in fixed]
    if unions:
        raise SchemaRefused(f"has '{unions[0]}' at its root, which the model APIs refuse")
    fixed.setdefault("type", "object")
    if fixed["type"] != "object":
        raise SchemaRefused(f"is of type {fixed['type']!r}, not an object")
    fixed.setdefault("properties", {})
    if not isinstance(fixed["properties"], dict):
        raise SchemaRefused("has 'properties' that are not an object")
    for prop in fixed["properties"].values():
        if isinstance(prop, dict):
            prop.pop("title", None)  # the property's own name, again: tokens for nothing
    for node in _walk(fixed):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            raise SchemaRefused(f"refers to another document ({ref[:80]})")
        kind = node.get("type")
        is_array = kind == "array" or (isinstance(kind, list) and "array" in kind)
        if is_array and "items" not in node and "prefixItems" not in node:
            node["items"] = {}
    try:
        _validator_class(fixed).check_schema(fixed)
    except SchemaError as exc:
        raise SchemaRefused(f"is not valid JSON Schema ({exc.message[:200]})") from None
    return fixed


class SchemaArguments:
    """Arguments checked against a JSON schema (a tool registered by schema)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        # no retrieval: a $ref outside the document is refused before it gets here
        self._validator = _validator_class(schema)(schema, registry=referencing.Registry())

    def validate(self, raw: dict[str, Any], tool: str) -> dict[str, Any]:
        errors = sorted(self._validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
        if not errors:
            return raw
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error.absolute_path) or 'arguments'}: {error.message[:200]}"
            for error in errors[:_MAX_PROBLEMS]
        )
        raise ToolError(f"Invalid arguments for '{tool}': {problems}.")


def _validator_class(schema: dict[str, Any]) -> type[jsonschema.protocols.Validator]:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema in ``node``, ``node`` included."""
    if not isinstance(node, dict):
        return
    yield node
    for key in _ONE:
        yield from _walk(node.get(key))
    for key in _MANY:
        if isinstance(node.get(key), list):
            for sub in node[key]:
                yield from _walk(sub)
    if isinstance(node.get("items"), list):  # the older tuple form
        for sub in node["items"]:
            yield from _walk(sub)
    for key in _NAMED:
        if isinstance(node.get(key), dict):
            for sub in node[key].values():
                yield from _walk(sub)
