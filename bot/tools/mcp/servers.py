"""The MCP servers of MCP_CONFIG as tools of the registry (a ``ToolSource``).

Each server connects in the background; its allowed tools are registered as
``SERVER__TOOL`` when it connects and listed again at every reconnection (tools it no
longer has are removed), not in between. A server that is down keeps its tools offered, so
that the next call reconnects to it. A turn that begins while servers are still making
their first connection waits for them, until STARTUP_WAIT_S after they began: the first
questions after a start (Slack's retries after a deploy) are offered their tools, and a
server that hangs costs those turns that wait once, not each turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import mcp_types as types

from bot.tools.base import SourceState, ToolRegistry
from bot.tools.mcp import tools
from bot.tools.mcp.config import ServerConfig
from bot.tools.mcp.connection import McpConnection
from bot.tools.schema import SchemaRefused, parameters_for_api

log = logging.getLogger(__name__)

#: how long, from the start of their first connections, turns wait for the servers
STARTUP_WAIT_S = 10.0


class McpServers:
    """Registers the tools of ``servers`` in ``registry`` as they connect."""

    def __init__(
        self,
        registry: ToolRegistry,
        servers: list[ServerConfig],
        *,
        connect_timeout_s: float = 30.0,
        call_timeout_s: float = 30.0,
        retry_s: tuple[float, float] = (2.0, 300.0),
    ) -> None:
        self.registry = registry
        self.connections = [
            McpConnection(
                config,
                self._offerer(config),
                connect_timeout_s=connect_timeout_s,
                call_timeout_s=call_timeout_s,
                retry_s=retry_s,
            )
            for config in servers
        ]
        self._offered: dict[str, list[str]] = {}
        self._warned: set[str] = set()
        #: when turns stop waiting for the first connections (time.monotonic)
        self._turns_wait_until = 0.0

    def start(self) -> None:
        self._turns_wait_until = time.monotonic() + STARTUP_WAIT_S
        for connection in self.connections:
            connection.start()

    async def ready(self, wait_s: float) -> None:
        await _first_attempts(self._connecting(), wait_s)

    async def ready_for_turn(self) -> None:
        connecting = self._connecting()
        if not connecting:
            return
        await _first_attempts(connecting, self._turns_wait_until - time.monotonic())
        for connection in self._connecting():
            self._warn_once(
                f"{connection.name}:slow",
                "MCP server %s is still connecting after %g s: the turn went on without its "
                "tools (and so do the next ones until it connects)",
                connection.label,
                STARTUP_WAIT_S,
            )

    def states(self) -> list[SourceState]:
        return [self._state(connection) for connection in self.connections]

    def _state(self, connection: McpConnection) -> SourceState:
        state = connection.state
        return SourceState(
            connection.name,
            connection.config.transport,
            state,
            len(self._offered.get(connection.name, [])),
            connection.problem if state == "failed" else None,
        )

    async def close(self) -> None:
        await asyncio.gather(*(connection.close() for connection in self.connections))

    def _connecting(self) -> list[McpConnection]:
        return [c for c in self.connections if c.state == "connecting"]

    def _offerer(self, config: ServerConfig) -> Callable[[list[types.Tool]], int]:
        return lambda listed: self._offer(config, listed)

    def _offer(self, config: ServerConfig, listed: list[types.Tool]) -> int:
        """Register the server's allowed tools, replacing what it offered before; how many
        it offers now."""
        for name in self._offered.pop(config.name, []):
            self.registry.remove(name)
        if config.allow is not None:
            missing = sorted(config.allow - {tool.name for tool in listed})
            if missing:
                self._warn_once(
                    f"{config.name}:allow",
                    "MCP server %s has no tool %s named in its allow list",
                    config.name,
                    ", ".join(missing),
                )
        offered = []
        for tool in listed:
            if config.offers(tool.name):
                registered = self._register(config, tool)
                if registered is not None:
                    offered.append(registered)
        self._offered[config.name] = offered
        return len(offered)

    def _register(self, config: ServerConfig, tool: types.Tool) -> str | None:
        try:
            parameters = parameters_for_api(tool.input_schema)
        except SchemaRefused as refused:
            self._warn_once(
                f"{config.name}:{tool.name}:schema",
                "MCP server %s: tool %s is not offered: its input schema %s",
                config.name,
                tool.name,
                refused,
            )
            return None
        name = tools.exposed_name(config.name, tool.name, set(self.registry.names()))
        if name is None:
            self._warn_once(
                f"{config.name}:{tool.name}:name",
                "MCP server %s: tool %s is not offered: its name is taken",
                config.name,
                tool.name,
            )
            return None
        writes = tools.writes(tool)
        self.registry.add_schema(
            name,
            self._caller(config, tool.name, writes),
            description=tools.description(config.name, tool),
            parameters=parameters,
            writes=writes,
            source=config.name,
            progress=tools.progress(config.name, tool),
        )
        return name

    def _caller(self, config: ServerConfig, tool: str, writes: bool) -> Callable[..., Any]:
        connection = next(c for c in self.connections if c.config is config)

        async def call(**arguments: Any) -> Any:
            result = await connection.call(tool, arguments, writes=writes)
            return tools.result_value(config.name, tool, result)

        return call

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)


async def _first_attempts(connections: list[McpConnection], wait_s: float) -> None:
    """Wait, at most ``wait_s``, for the first attempts of ``connections`` to end."""
    if not connections or wait_s <= 0:
        return
    waits = [asyncio.ensure_future(c.first_attempt()) for c in connections]
    _, pending = await asyncio.wait(waits, timeout=wait_s)
    for wait in pending:
        wait.cancel()
