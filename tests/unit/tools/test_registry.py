"""The tool registry: schemas from type hints and docstrings, validation, limits."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

from bot.messages import ToolCall
from bot.tools.base import MAX_RESULT_CHARS, ToolRegistry, tool


class Tickets:
    @tool(writes=True)
    def open_ticket(
        self,
        summary: str,
        priority: Literal["Low", "High"] = "Low",
        labels: list[str] | None = None,
    ) -> dict[str, str]:
        """Open a ticket.

        Args:
            summary: one line saying what is wrong.
            priority: how urgent it is.
            labels: words to file it under.
        """
        return {"summary": summary, "priority": priority, "labels": ",".join(labels or [])}

    def not_a_tool(self) -> None:
        """Helpers without @tool are not offered."""


def run(registry: ToolRegistry, name: str, arguments: str) -> dict:
    return json.loads(asyncio.run(registry.run(ToolCall("c1", name, arguments))))


def test_schema_comes_from_hints_and_docstring() -> None:
    registry = ToolRegistry()
    registry.add_object(Tickets())
    (spec,) = registry.specs()
    assert spec.name == "open_ticket" and spec.description == "Open a ticket."
    properties = spec.parameters["properties"]
    assert spec.parameters["required"] == ["summary"]
    assert spec.parameters["additionalProperties"] is False
    assert properties["summary"] == {
        "type": "string",
        "description": "one line saying what is wrong.",
    }
    assert properties["priority"]["enum"] == ["Low", "High"]
    assert registry.writes("open_ticket") and not registry.writes("missing")


def test_valid_call_runs_and_invalid_ones_explain_themselves() -> None:
    registry = ToolRegistry()
    registry.add_object(Tickets())
    assert run(registry, "open_ticket", '{"summary": "down", "labels": ["a", "b"]}') == {
        "summary": "down",
        "priority": "Low",
        "labels": "a,b",
    }
    assert (
        "priority" in run(registry, "open_ticket", '{"summary": "x", "priority": "Meh"}')["error"]
    )
    assert "summary" in run(registry, "open_ticket", "{}")["error"]
    assert "JSON object" in run(registry, "open_ticket", "[1]")["error"]
    assert "not found" in run(registry, "close_ticket", "{}")["error"]


def test_huge_results_are_cut() -> None:
    registry = ToolRegistry()

    @tool
    def dump() -> str:
        """Returns too much."""
        return "x" * (MAX_RESULT_CHARS * 2)

    registry.add(dump)
    result = run(registry, "dump", "")
    assert result["truncated"] is True and len(result["partial"]) == MAX_RESULT_CHARS


def test_progress_lines_describe_calls_safely() -> None:
    registry = ToolRegistry()

    @tool(progress="Looking up {issue_key} in Jira")
    def get(issue_key: str) -> str:
        """Get."""
        return issue_key

    registry.add(get)
    describe = registry.describe
    assert describe(ToolCall("1", "get", '{"issue_key": "TASK-1"}')) == "Looking up TASK-1 in Jira"
    assert describe(ToolCall("1", "get", "{}")) == "Looking up … in Jira"
    assert describe(ToolCall("1", "get", "{broken")) == "Running get"
    assert describe(ToolCall("1", "nope", "{}")) == "Running nope"
    long = describe(ToolCall("1", "get", '{"issue_key": "' + "x" * 500 + '"}'))
    assert len(long) < 100
