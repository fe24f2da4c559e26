"""The tool registry: the tools (bot.tools.tool) the model is offered, by name.

The registry derives the JSON schema from the type hints, validates the model's
arguments against it, enforces a time limit and turns every failure into an
``{"error": ...}`` result: ``run()`` never raises. A tool known only by a JSON schema (an
MCP server's) is registered with ``add_schema`` and validated against that schema.

A tool that writes (``writes=True``) may take a keyword-only ``marker`` argument: the
call's idempotency marker (``ToolCall.marker``), which it puts on what it creates. Its
``lookup`` (a function, or the name of a method of the same object) finds what a call with
that marker created, for a turn resumed after a crash: ``recover()`` asks it instead of
running the call again, so a write is never sent twice. Its ``preview`` says what a call
would change, for the person asked to approve it (``preview()``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from types import MethodType
from typing import Any, Literal, Protocol, cast

from bot import telemetry
from bot.errors import ToolError
from bot.messages import ToolCall, ToolSpec
from bot.tools.schema import MARKER_ARGUMENT, SchemaArguments, describe_function
from bot.tools.tool import (
    BUILT_IN,
    TOOL_MARK,
    Tool,
    ToolOptions,
    ToolResult,
    encode_result,
)

log = logging.getLogger(__name__)

NOT_REPEATED = (
    "The bot was restarted while '{name}' was running, so it cannot tell whether it was "
    "done. It was not run again, to avoid doing it twice: check before asking for it again."
)


@dataclasses.dataclass(frozen=True)
class SourceState:
    """Where one server of a tool source stands (``bot tools`` shows it, and its fields are
    the keys of its ``--json`` object)."""

    #: the server's name
    server: str
    #: how it is reached: "stdio" or "http"
    transport: str
    #: "connecting": its first connection is being made
    state: Literal["connecting", "connected", "failed"]
    #: how many of its tools are offered now
    tools: int
    #: why it is not connected, in a few words; None while it is
    reason: str | None = None

    def describe(self) -> str:
        """In words: "connected, 3 tools", "connecting" or "failed: why"."""
        if self.state == "connected":
            return f"connected, {self.tools} tools"
        if self.state == "connecting":
            return "connecting"
        return f"failed: {self.reason}"


class ToolSource(Protocol):
    """Tools that arrive after start-up (an MCP server's): the registry starts the source
    in the event loop that first uses it, can wait for it, and closes it."""

    def start(self) -> None:
        """Begin connecting in the background; called in a running event loop."""
        ...

    async def ready(self, wait_s: float) -> None:
        """Wait, at most ``wait_s``, for the first connections to be made or to fail."""
        ...

    async def ready_for_turn(self) -> None:
        """A turn's wait for the first connections still being made: bounded from
        ``start()`` on, so that it is spent once, by the turns that come while they are
        made. Each server a turn goes on without is named in a warning."""
        ...

    def states(self) -> list[SourceState]: ...

    async def close(self) -> None: ...


class ToolRegistry:
    """The tools offered to the model, by name."""

    def __init__(self, default_timeout: float = 30.0) -> None:
        self.default_timeout = default_timeout
        self._tools: dict[str, Tool] = {}
        self._sources: list[ToolSource] = []
        self._unstarted: list[ToolSource] = []
        self._closers: list[Callable[[], Awaitable[Any]]] = []

    def add(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        writes: bool | None = None,
        timeout: float | None = None,
        source: str = BUILT_IN,
    ) -> Tool:
        options = getattr(function, TOOL_MARK, ToolOptions(None, False, None))
        tool_name = name or options.name or function.__name__
        description, arguments = describe_function(function, tool_name)
        lookup, preview = (
            getattr(cast(MethodType, function).__self__, found)  # a method of the same object
            if isinstance(found, str)
            else found
            for found in (options.lookup, options.preview)
        )
        entry = Tool(
            name=tool_name,
            description=description,
            function=function,
            arguments=arguments,
            writes=options.writes if writes is None else writes,
            timeout=timeout or options.timeout,
            progress=options.progress,
            lookup=lookup,
            source=source,
            defaults=options.defaults,
            preview=preview,
        )
        self._tools[tool_name] = entry
        return entry

    def add_object(self, obj: object, *, source: str = BUILT_IN) -> None:
        """Register every method of ``obj`` marked with ``@tool``."""
        for _, member in inspect.getmembers(obj, inspect.ismethod):
            if hasattr(member, TOOL_MARK):
                self.add(member, source=source)

    def add_schema(
        self,
        name: str,
        function: Callable[..., Any],
        *,
        description: str,
        parameters: dict[str, Any],
        writes: bool,
        source: str,
        progress: str | None = None,
        timeout: float | None = None,
    ) -> Tool:
        """Register ``function`` (called with the arguments as keywords) under a JSON schema
        of its arguments, which the model's arguments are validated against. The schema is
        sent as given: check it first with ``schema.parameters_for_api``. A writing tool
        registered so has no lookup: after a crash its call is not run again."""
        entry = Tool(
            name=name,
            description=description,
            function=function,
            arguments=SchemaArguments(parameters),
            writes=writes,
            timeout=timeout,
            progress=progress,
            source=source,
        )
        self._tools[name] = entry
        return entry

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def add_source(self, source: ToolSource) -> None:
        """Attach tools that arrive later; started now when an event loop runs, else by
        the first use of the registry in one."""
        self._sources.append(source)
        self._unstarted.append(source)
        self._start_sources()

    def on_close(self, closer: Callable[[], Awaitable[Any]]) -> None:
        """Call ``closer`` when the registry is closed (after its sources)."""
        self._closers.append(closer)

    async def ready(self, wait_s: float) -> list[str]:
        """Wait, at most ``wait_s`` in all, for the sources' first connections; what is not
        connected, one line each ("NAME: why")."""
        self._start_sources()
        await asyncio.gather(*(source.ready(wait_s) for source in self._sources))
        return [
            f"{s.server}: {s.reason or 'still connecting'}"
            for s in self.states()
            if s.state != "connected"
        ]

    async def ready_for_turn(self) -> None:
        """Before a turn lists its tools: the sources still connecting get what is left of
        their start-up wait (see ToolSource)."""
        self._start_sources()
        if self._sources:  # most bots have none: nothing is awaited
            await asyncio.gather(*(source.ready_for_turn() for source in self._sources))

    def states(self) -> list[SourceState]:
        """Where each server of the sources stands."""
        return [state for source in self._sources for state in source.states()]

    async def close(self) -> None:
        """Close the sources (MCP servers: their processes stop) and what ``on_close`` named."""
        await asyncio.gather(*(source.close() for source in self._sources))
        self._sources.clear()
        self._unstarted.clear()
        for closer in self._closers:
            await closer()
        self._closers.clear()

    def start(self) -> None:
        """Begin connecting the sources in the background (call in the event loop that
        serves): a running bot has its MCP servers' tools as soon as they connect."""
        self._start_sources()

    def _start_sources(self) -> None:
        if not self._unstarted:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # built outside an event loop: the first use inside one starts them
        starting, self._unstarted = self._unstarted, []
        for source in starting:
            source.start()

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool]:
        self._start_sources()
        return list(self._tools.values())

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        self._start_sources()
        return [t.spec for t in self._tools.values()]

    def writes(self, name: str) -> bool:
        entry = self._tools.get(name)
        return bool(entry and entry.writes)

    def with_defaults(self, call: ToolCall, settings: Mapping[str, str]) -> ToolCall:
        """``call`` with the arguments it leaves out that its tool takes from ``settings``
        (a channel's: see ``tool(defaults=)``); as it is when there are none to add."""
        entry = self._tools.get(call.name)
        if entry is None or not entry.defaults or not settings:
            return call
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            return call
        if not isinstance(arguments, dict):
            return call
        added = {
            argument: settings[setting]
            for argument, setting in entry.defaults.items()
            if arguments.get(argument) in (None, "") and settings.get(setting)
        }
        if not added:
            return call
        return dataclasses.replace(
            call, arguments=json.dumps({**arguments, **added}, ensure_ascii=False)
        )

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

    async def preview(self, call: ToolCall) -> str:
        """The change ``call`` would make, in words for the person asked to approve it: what
        its tool's ``preview`` says (bounded by the tool's time limit), else what
        ``describe`` says. Never raises."""
        entry = self._tools.get(call.name)
        if entry is None or entry.preview is None:
            return self.describe(call)
        try:
            _, kwargs = self.parse(call)
            limit = entry.timeout or self.default_timeout
            said = await asyncio.wait_for(_invoke(entry.preview, kwargs), limit)
        except Exception as exc:  # the card still says what the call does
            log.info("preview of %s failed (%s)", call.name, type(exc).__name__)
            return self.describe(call)
        return str(said) if said else self.describe(call)

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
        return entry, entry.arguments.validate(raw, call.name)

    async def run(self, call: ToolCall) -> ToolResult:
        """Run one call: its result as JSON text, and whether it succeeded. Never raises."""
        return await self._bounded(call, recovering=False)

    async def recover(self, call: ToolCall) -> ToolResult:
        """The result of a writing call that was sent before a crash and has no stored
        result: what its tool's ``lookup`` finds by the call's marker, or an error result
        saying that it cannot tell. The call itself is never sent again. Never raises."""
        return await self._bounded(call, recovering=True)

    async def _bounded(self, call: ToolCall, *, recovering: bool) -> ToolResult:
        known = call.name in self._tools
        with telemetry.tool_call(call.name, call.id, call.arguments, known=known) as observed:
            result = await self._outcome(call, recovering)
            observed.done(result.output, ok=result.ok)
        return result

    async def _outcome(self, call: ToolCall, recovering: bool) -> ToolResult:
        started = time.perf_counter()
        self._start_sources()
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
            result = encode_result(value)
            log.info("tool %s ok in %.0f ms", call.name, (time.perf_counter() - started) * 1000)
            return ToolResult(result)
        except ToolError as exc:
            log.info("tool %s error: %s", call.name, exc)
            return ToolResult.error(str(exc))
        except Exception as exc:
            log.exception("tool %s raised", call.name)
            return ToolResult.error(f"'{call.name}' failed unexpectedly ({type(exc).__name__}).")


class _Blank(dict[str, Any]):
    """Arguments the model left out show as "…" in a progress line."""

    def __missing__(self, key: str) -> str:
        return "…"


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _invoke(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(function):
        return await function(**kwargs)
    # blocking tools (the jira client) must never block the event loop
    return await asyncio.to_thread(function, **kwargs)
