"""The tool registry: a tool is one typed function or method with a docstring.

The registry derives the JSON schema from the type hints, validates the model's
arguments against it, enforces a time limit and turns every failure into an
``{"error": ...}`` result: ``run()`` never raises.

A tool that writes (``writes=True``) may take a keyword-only ``marker`` argument: the
call's idempotency marker (``ToolCall.marker``), which it puts on what it creates. Its
``lookup`` (a function, or the name of a method of the same object) finds what a call with
that marker created, for a turn resumed after a crash: ``recover()`` asks it instead of
running the call again, so a write is never sent twice.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from bot.errors import ToolError
from bot.messages import ToolCall, ToolSpec

log = logging.getLogger(__name__)

#: a result longer than this is cut, so one tool cannot flood the model's context
MAX_RESULT_CHARS = 16_000

_TOOL_MARK = "__bot_tool__"


@dataclass(frozen=True)
class _ToolOptions:
    name: str | None
    writes: bool
    timeout: float | None
    progress: str | None = None
    lookup: str | Callable[..., Any] | None = None


#: the keyword-only argument through which a writing tool receives its call's marker
MARKER_ARGUMENT = "marker"

NOT_REPEATED = (
    "The bot was restarted while '{name}' was running, so it cannot tell whether it was "
    "done. It was not run again, to avoid doing it twice: check before asking for it again."
)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    writes: bool = False,
    timeout: float | None = None,
    progress: str | None = None,
    lookup: str | Callable[..., Any] | None = None,
) -> Any:
    """Mark a function or method as a tool. ``writes=True`` declares a tool that changes
    something outside the bot (it may need a person's approval). ``progress`` says what a
    call is doing, for people watching, with ``{argument}`` placeholders: "Looking up
    {issue_key} in Jira". ``lookup`` (a writing tool's) is called as
    ``lookup(marker, **arguments)`` to find what an earlier call created: it returns that
    call's result, or raises ToolError saying what it found (see ``recover``)."""

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, _TOOL_MARK, _ToolOptions(name, writes, timeout, progress, lookup))
        return func

    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    function: Callable[..., Any]
    arguments: type[BaseModel]
    writes: bool
    timeout: float | None
    progress: str | None = None
    #: a writing tool's way of finding what a call with a given marker created
    lookup: Callable[..., Any] | None = None

    @property
    def takes_marker(self) -> bool:
        parameter = inspect.signature(self.function).parameters.get(MARKER_ARGUMENT)
        return parameter is not None and parameter.kind is parameter.KEYWORD_ONLY

    @functools.cached_property
    def spec(self) -> ToolSpec:  # built once: every request of every turn sends it
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(self.name, self.description, schema)


class ToolRegistry:
    """The tools offered to the model, by name."""

    def __init__(self, default_timeout: float = 30.0) -> None:
        self.default_timeout = default_timeout
        self._tools: dict[str, Tool] = {}

    def add(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        writes: bool | None = None,
        timeout: float | None = None,
    ) -> Tool:
        options = getattr(function, _TOOL_MARK, _ToolOptions(None, False, None))
        tool_name = name or options.name or function.__name__
        description, arguments = _describe(function, tool_name)
        lookup = options.lookup
        if isinstance(lookup, str):  # a method of the same object
            lookup = getattr(function.__self__, lookup)  # type: ignore[attr-defined]
        entry = Tool(
            name=tool_name,
            description=description,
            function=function,
            arguments=arguments,
            writes=options.writes if writes is None else writes,
            timeout=timeout or options.timeout,
            progress=options.progress,
            lookup=lookup,
        )
        self._tools[tool_name] = entry
        return entry

    def add_object(self, obj: object) -> None:
        """Register every method of ``obj`` marked with ``@tool``."""
        for _, member in inspect.getmembers(obj, inspect.ismethod):
            if hasattr(member, _TOOL_MARK):
                self.add(member)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def writes(self, name: str) -> bool:
        entry = self._tools.get(name)
        return bool(entry and entry.writes)

    def describe(self, call: ToolCall) -> str:
        """What ``call`` is doing, in words for the person waiting ("Looking up TASK-1
        in Jira"); never fails, whatever the model sent."""
        entry = self._tools.get(call.name)
        fallback = f"Running {call.name}"
        if entry is None or not entry.progress:
            return fallback
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            return fallback
        if not isinstance(arguments, dict):
            return fallback
        values = {k: _short(v) for k, v in arguments.items()}
        try:
            return entry.progress.format_map(_Blank(values))
        except (ValueError, IndexError, AttributeError):
            return fallback

    def parse(self, call: ToolCall) -> tuple[Tool, dict[str, Any]]:
        """The tool and validated arguments for ``call``; ToolError when either is wrong."""
        entry = self._tools.get(call.name)
        if entry is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise ToolError(f"Tool '{call.name}' not found. Available tools: {known}.")
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ToolError(f"Arguments for '{call.name}' are not valid JSON: {exc.msg}.") from None
        if not isinstance(raw, dict):
            raise ToolError(f"Arguments for '{call.name}' must be a JSON object.")
        try:
            model = entry.arguments.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolError(f"Invalid arguments for '{call.name}': {problems}.") from None
        return entry, {k: getattr(model, k) for k in type(model).model_fields}

    async def run(self, call: ToolCall) -> str:
        """Run one call and return its result as JSON text. Never raises."""
        return await self._bounded(call, recovering=False)

    async def recover(self, call: ToolCall) -> str:
        """The result of a writing call that was sent before a crash and has no stored
        result: what its tool's ``lookup`` finds by the call's marker, or an error result
        saying that it cannot tell. The call itself is never sent again. Never raises."""
        return await self._bounded(call, recovering=True)

    async def _bounded(self, call: ToolCall, *, recovering: bool) -> str:
        started = time.perf_counter()
        try:
            entry, kwargs = self.parse(call)
            if recovering:
                if entry.lookup is None or call.marker is None:
                    raise ToolError(NOT_REPEATED.format(name=call.name))
                function, kwargs = entry.lookup, {MARKER_ARGUMENT: call.marker, **kwargs}
            else:
                function = entry.function
                if call.marker is not None and entry.takes_marker:
                    kwargs[MARKER_ARGUMENT] = call.marker
            limit = entry.timeout or self.default_timeout
            try:
                value = await asyncio.wait_for(_invoke(function, kwargs), limit)
            except TimeoutError:
                raise ToolError(f"'{call.name}' timed out after {limit:g} s.") from None
            result = _encode(value)
            log.info("tool %s ok in %.0f ms", call.name, (time.perf_counter() - started) * 1000)
            return result
        except ToolError as exc:
            log.info("tool %s error: %s", call.name, exc)
            return error_result(str(exc))
        except Exception as exc:
            log.exception("tool %s raised", call.name)
            return error_result(f"'{call.name}' failed unexpectedly ({type(exc).__name__}).")


class _Blank(dict):  # type: ignore[type-arg]
    """Arguments the model left out show as "…" in a progress line."""

    def __missing__(self, key: str) -> str:
        return "…"


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_result(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)


async def _invoke(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(function):
        return await function(**kwargs)
    # blocking tools (the jira client) must never block the event loop
    return await asyncio.to_thread(function, **kwargs)


def _encode(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        return json.dumps(
            {"truncated": True, "partial": text[:MAX_RESULT_CHARS]}, ensure_ascii=False
        )
    return text


_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _describe(function: Callable[..., Any], name: str) -> tuple[str, type[BaseModel]]:
    """The description (docstring before ``Args:``) and an argument model from the hints."""
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
    model = create_model(  # type: ignore[call-overload]
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    return " ".join(summary.split()), model
