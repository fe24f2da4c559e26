"""JSON schemas of tools registered by schema: what is sent to the model APIs, and the
validation of the model's arguments."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.messages import ToolCall
from bot.tools.base import ToolRegistry
from bot.tools.schema import SchemaRefused, parameters_for_api


def test_a_plain_object_schema_is_kept_but_for_titles() -> None:
    schema = {
        "type": "object",
        "title": "lookupArguments",
        "properties": {"key": {"type": "string", "title": "Key"}},
        "required": ["key"],
    }
    assert parameters_for_api(schema) == {
        "type": "object",
        "properties": {"key": {"type": "string"}},
        "required": ["key"],
    }
    assert schema["title"] == "lookupArguments"  # a copy was repaired, not the original


def test_repairs() -> None:
    fixed = parameters_for_api(
        {"properties": {"tags": {"type": "array"}, "pair": {"type": ["array", "null"]}}}
    )
    assert fixed["type"] == "object"
    assert fixed["properties"]["tags"] == {"type": "array", "items": {}}
    assert fixed["properties"]["pair"]["items"] == {}
    assert parameters_for_api({"type": "object"}) == {"type": "object", "properties": {}}


REFUSED: dict[str, tuple[Any, str]] = {
    "not an object": ([], "is not a JSON object"),
    "a string root": ({"type": "string"}, "not an object"),
    "a union root": ({"anyOf": [{"type": "object"}]}, "'anyOf' at its root"),
    "properties": ({"type": "object", "properties": []}, "'properties'"),
    "a remote ref": (
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
        "another document",
    ),
    "invalid": ({"type": "object", "properties": {"a": {"type": "strng"}}}, "not valid JSON"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_the_apis_refuse_is_refused(case: str) -> None:
    schema, says = REFUSED[case]
    with pytest.raises(SchemaRefused, match=says):
        parameters_for_api(schema)


def test_arguments_are_validated_against_the_schema() -> None:
    seen: list[dict[str, Any]] = []

    async def function(**arguments: Any) -> dict[str, bool]:
        seen.append(arguments)
        return {"ordered": True}

    registry = ToolRegistry()
    schema = {
        "type": "object",
        "$defs": {"Size": {"enum": ["S", "L"]}},
        "properties": {"name": {"type": "string"}, "size": {"$ref": "#/$defs/Size"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    entry = registry.add_schema(
        "srv__order",
        function,
        description="Order.",
        parameters=parameters_for_api(schema),
        writes=True,
        source="srv",
    )
    assert (entry.spec.name, entry.source, entry.writes) == ("srv__order", "srv", True)

    def run(arguments: str) -> dict[str, Any]:
        return json.loads(asyncio.run(registry.run(ToolCall("1", "srv__order", arguments))).output)

    assert run('{"name": "tea", "size": "L"}') == {"ordered": True}
    assert seen == [{"name": "tea", "size": "L"}]
    error = run('{"size": "M", "extra": 1}')["error"]
    assert error.startswith("Invalid arguments for 'srv__order':")
    assert "'name' is a required property" in error and "size: 'M' is not one of" in error
    assert len(seen) == 1
    # a writing tool registered by schema has no lookup: after a crash it is not run again
    call = ToolCall("1", "srv__order", '{"name": "tea"}', marker="m-1")
    restarted = asyncio.run(registry.recover(call)).output
    assert "It was not run again" in json.loads(restarted)["error"]
