"""The tool registry: schemas from type hints and docstrings, validation, limits."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

from bot.messages import ToolCall
from bot.tools.base import ToolRegistry
from bot.tools.tool import MAX_RESULT_CHARS, tool


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
    return json.loads(asyncio.run(registry.run(ToolCall("c1", name, arguments))).output)


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


class Orders:
    """A writing tool with a marker and a lookup, as the journal uses them."""

    def __init__(self) -> None:
        self.placed: dict[str, str] = {}

    @tool(writes=True, lookup="find_order")
    def place_order(self, item: str, *, marker: str | None = None) -> dict[str, str]:
        """Place an order.

        Args:
            item: what to order.
        """
        self.placed[marker or "none"] = item
        return {"order": marker or "none", "item": item}

    def find_order(self, marker: str, **arguments: object) -> dict[str, str]:
        from bot.errors import ToolError

        if marker not in self.placed:
            raise ToolError(f"No order carries {marker}.")
        return {"order": marker, "item": self.placed[marker], "found": "yes"}

    @tool(writes=True)
    def cancel_order(self, order: str) -> str:
        """Cancel an order.

        Args:
            order: the order's id.
        """
        return "cancelled"


def test_a_writing_call_carries_its_marker_and_is_recovered_by_it_not_run_again() -> None:
    orders = Orders()
    registry = ToolRegistry()
    registry.add_object(orders)
    assert "marker" not in registry.get("place_order").spec.parameters["properties"]  # type: ignore[union-attr]
    call = ToolCall("c1", "place_order", '{"item": "paper"}', marker="bot-1")
    assert json.loads(asyncio.run(registry.run(call)).output) == {"order": "bot-1", "item": "paper"}

    found = json.loads(asyncio.run(registry.recover(call)).output)
    assert found == {"order": "bot-1", "item": "paper", "found": "yes"}
    assert orders.placed == {"bot-1": "paper"}  # looked up, not placed again

    lost = ToolCall("c2", "place_order", '{"item": "ink"}', marker="bot-2")
    assert json.loads(asyncio.run(registry.recover(lost)).output) == {
        "error": "No order carries bot-2."
    }
    assert "bot-2" not in orders.placed

    # a writing tool without a lookup: the result says so, and nothing runs
    cancel = ToolCall("c3", "cancel_order", '{"order": "bot-1"}', marker="bot-3")
    error = json.loads(asyncio.run(registry.recover(cancel)).output)["error"]
    assert "not run again" in error and "cancel_order" in error


class Moves:
    """A writing tool whose preview reads what it would change."""

    def __init__(self) -> None:
        self.status = {"TASK-1": "In Progress"}

    @tool(writes=True, preview="say_move", progress="Moving {key}")
    def move(self, key: str, status: str) -> str:
        """Move an issue.

        Args:
            key: the issue.
            status: where to.
        """
        self.status[key] = status
        return "moved"

    def say_move(self, key: str, status: str) -> str:
        return f"Move {key} from {self.status[key]} to {status}"


def test_a_preview_says_the_change_in_words_and_falls_back_to_the_progress_line() -> None:
    moves = Moves()
    registry = ToolRegistry()
    registry.add_object(moves)
    registry.add_object(Orders())

    said = asyncio.run(
        registry.preview(ToolCall("1", "move", '{"key": "TASK-1", "status": "Done"}'))
    )
    assert said == "Move TASK-1 from In Progress to Done"
    assert moves.status == {"TASK-1": "In Progress"}  # read, nothing changed
    # a preview that fails (an unknown issue), bad arguments, or a tool without one: the
    # progress line (what the call does), never an exception
    unknown = ToolCall("2", "move", '{"key": "NOPE-9", "status": "Done"}')
    assert asyncio.run(registry.preview(unknown)) == "Moving NOPE-9"
    assert asyncio.run(registry.preview(ToolCall("3", "move", "{broken"))) == "Running move"
    order = ToolCall("4", "place_order", '{"item": "paper"}')
    assert asyncio.run(registry.preview(order)) == "Running place_order"


def test_a_preview_is_stored_with_its_call() -> None:
    call = ToolCall("1", "move", "{}", marker="bot-1", preview="Move TASK-1 to Done")
    stored = call.to_stored()
    assert ToolCall.from_dict(stored) == call
    assert "preview" not in call.to_dict()  # not part of the history documents
