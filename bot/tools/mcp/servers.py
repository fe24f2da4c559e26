"""The MCP servers of MCP_CONFIG as tools of the registry (a ``ToolSource``).

Each server connects in the background; its allowed tools are registered as
``SERVER__TOOL`` when it connects and listed again at every reconnection (tools it no
longer has are removed), not in between. A server that is down keeps its tools offered, so
that the next call reconnects to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types

from bot.tools.base import ToolRegistry
from bot.tools.mcp import tools
from bot.tools.mcp.config import ServerConfig
from bot.tools.mcp.connection import McpConnection
from bot.tools.schema import SchemaRefused, parameters_for_api

log = logging.getLogger(__name__)


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

    def start(self) -> None:
        for connection in self.connections:
            connection.start()

    async def ready(self, wait_s: float) -> list[str]:
        waits = [asyncio.ensure_future(c.first_attempt()) for c in self.connections]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=wait_s)
            for wait in pending:
                wait.cancel()
        return [
            f"{c.name}: {c.problem or 'not connected'}" for c in self.connections if not c.connected
        ]

    async def close(self) -> None:
        await asyncio.gather(*(connection.close() for connection in self.connections))

    def _offerer(self, config: ServerConfig) -> Callable[[list[types.Tool]], None]:
        return lambda listed: self._offer(config, listed)

    def _offer(self, config: ServerConfig, listed: list[types.Tool]) -> None:
        """Register the server's allowed tools, replacing what it offered before."""
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
