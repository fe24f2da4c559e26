"""An MCP tool as a registry tool: names, reads or writes, descriptions, results."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from bot.errors import ToolError
from bot.tools.mcp.tools import (
    DESCRIPTION_LIMIT,
    MAX_NAME,
    description,
    exposed_name,
    progress,
    result_value,
    writes,
)


def tool(name: str = "t", **fields: Any) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"}, **fields)


def test_names_are_made_acceptable_to_the_model_apis() -> None:
    assert exposed_name("jira", "get_issue", set()) == "jira__get_issue"
    assert exposed_name("my server", "search.v2", set()) == "my_server__search_v2"
    long = exposed_name("srv", "x" * 100, set())
    assert long is not None and len(long) == MAX_NAME and long.startswith("srv__xxx")
    assert exposed_name("srv", "x" * 100, set()) == long  # the same every time


def test_colliding_names_get_a_digest() -> None:
    first = exposed_name("a", "b.c", set())
    second = exposed_name("a", "b_c", {first})
    assert first == "a__b_c" and second is not None and second != first
    assert second.startswith("a__b_c_") and len(second) <= MAX_NAME


def test_only_a_read_only_and_not_destructive_tool_reads() -> None:
    ann = types.ToolAnnotations
    assert not writes(tool(annotations=ann(read_only_hint=True)))
    assert not writes(tool(annotations=ann(read_only_hint=True, destructive_hint=False)))
    assert writes(tool(annotations=ann(read_only_hint=True, destructive_hint=True)))
    assert writes(tool(annotations=ann(destructive_hint=False)))
    assert writes(tool())


def test_descriptions_and_progress() -> None:
    assert description("srv", tool(description=" Finds things. ")) == "Finds things."
    assert description("srv", tool(title="Finder")) == "Finder"
    assert description("srv", tool("find")) == "The find tool of the MCP server srv."
    assert len(description("srv", tool(description="x" * 5000))) == DESCRIPTION_LIMIT
    assert progress("docs {prod}", tool("get")).format_map({}) == "Running get on docs {prod}"


def text(*parts: str) -> list[types.ContentBlock]:
    return [types.TextContent(text=part) for part in parts]


def test_results() -> None:
    assert result_value("s", "t", types.CallToolResult(content=text("a", "b"))) == "a\nb"
    structured = types.CallToolResult(content=text("{...}"), structured_content={"n": 1})
    assert result_value("s", "t", structured) == {"n": 1}
    assert result_value("s", "t", types.CallToolResult(content=[])) == {
        "note": "t returned no content."
    }
    image = types.ImageContent(data="aGk=", mime_type="image/png")
    assert result_value("s", "t", types.CallToolResult(content=[image])) == "[image: image/png]"
    with pytest.raises(ToolError, match=r"^no such ticket$"):
        result_value("s", "t", types.CallToolResult(content=text("no such ticket"), is_error=True))
    with pytest.raises(ToolError, match="failed without saying why"):
        result_value("s", "t", types.CallToolResult(content=[], is_error=True))
