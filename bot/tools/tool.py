"""A tool: one typed function or method with a docstring, marked with ``tool``, and what a
call of it gives the model (``ToolResult``). The registry (bot.tools.base) runs them."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, overload

from pydantic import BaseModel

from bot.messages import ToolSpec
from bot.tools.schema import MARKER_ARGUMENT

#: a result longer than this is cut, so one tool cannot flood the model's context
MAX_RESULT_CHARS = 16_000

TOOL_MARK = "__bot_tool__"

F = TypeVar("F", bound=Callable[..., Any])

#: the source of a tool that belongs to no service (``bot tools`` shows it)
BUILT_IN = "built in"


@dataclass(frozen=True)
class ToolOptions:
    name: str | None
    writes: bool
    timeout: float | None
    progress: str | None = None
    lookup: str | Callable[..., Any] | None = None
    defaults: Mapping[str, str] | None = None
    preview: str | Callable[..., Any] | None = None


@overload
def tool(fn: F) -> F: ...
@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    writes: bool = False,
    timeout: float | None = None,
    progress: str | None = None,
    lookup: str | Callable[..., Any] | None = None,
    defaults: Mapping[str, str] | None = None,
    preview: str | Callable[..., Any] | None = None,
) -> Callable[[F], F]: ...


def tool(
    fn: F | None = None,
    *,
    name: str | None = None,
    writes: bool = False,
    timeout: float | None = None,
    progress: str | None = None,
    lookup: str | Callable[..., Any] | None = None,
    defaults: Mapping[str, str] | None = None,
    preview: str | Callable[..., Any] | None = None,
) -> F | Callable[[F], F]:
    """Mark a function or method as a tool. ``writes=True`` declares a tool that changes
    something outside the bot (it may need a person's approval). ``progress`` says what a
    call is doing, for people watching, with ``{argument}`` placeholders: "Looking up
    {issue_key} in Jira". ``lookup`` (a writing tool's) is called as
    ``lookup(marker, **arguments)`` to find what an earlier call created: it returns that
    call's result, or raises ToolError saying what it found (see ``recover``). ``preview``
    (a writing tool's, a function or the name of a method of the same object) is called with
    a call's arguments when its turn pauses for approval, and returns the change in words a
    person can check ("Move TASK-12 from In Progress to Done"); it may read, never write."""

    def mark(func: F) -> F:
        options = ToolOptions(name, writes, timeout, progress, lookup, defaults, preview)
        setattr(func, TOOL_MARK, options)
        return func

    return mark(fn) if fn is not None else mark


class Arguments(Protocol):
    """What a tool's arguments must be: ``schema`` for the model, ``validate`` for a call."""

    schema: dict[str, Any]

    def validate(self, raw: dict[str, Any], tool: str) -> dict[str, Any]:
        """The keyword arguments for the tool; ToolError saying what is wrong."""
        ...


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    function: Callable[..., Any]
    arguments: Arguments
    writes: bool
    timeout: float | None
    progress: str | None = None
    #: a writing tool's way of finding what a call with a given marker created
    lookup: Callable[..., Any] | None = None
    #: where it comes from, for people: "built in", "Jira", "CRM", an MCP server's name
    source: str = BUILT_IN
    #: argument -> the channel setting that fills it when a call leaves it out
    defaults: Mapping[str, str] | None = None
    #: a writing tool's way of saying what a call would change, before it is approved
    preview: Callable[..., Any] | None = None

    @property
    def takes_marker(self) -> bool:
        parameter = inspect.signature(self.function).parameters.get(MARKER_ARGUMENT)
        return parameter is not None and parameter.kind is parameter.KEYWORD_ONLY

    @functools.cached_property
    def spec(self) -> ToolSpec:  # built once: every request of every turn sends it
        return ToolSpec(self.name, self.description, self.arguments.schema)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A call's result: the JSON text the model reads, and whether the call succeeded."""

    output: str
    ok: bool = True

    @classmethod
    def error(cls, message: str) -> ToolResult:
        """A failed call: ``{"error": message}``, which the model reads as the result."""
        return cls(json.dumps({"error": message}, ensure_ascii=False), ok=False)


def encode_result(value: Any) -> str:
    """A tool's return value as the JSON text the model reads (cut past MAX_RESULT_CHARS)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        return json.dumps(
            {"truncated": True, "partial": text[:MAX_RESULT_CHARS]}, ensure_ascii=False
        )
    return text
