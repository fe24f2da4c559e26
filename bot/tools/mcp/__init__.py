"""MCP servers (MCP_CONFIG) as tools, on the official ``mcp`` SDK: see servers.py."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bot.tools.base import ToolRegistry
from bot.tools.mcp.config import ServerConfig, load_servers

if TYPE_CHECKING:
    from bot.tools.mcp.servers import McpServers

__all__ = ["ServerConfig", "load_servers", "mcp_servers"]


def mcp_servers(
    config: Path | None, registry: ToolRegistry, call_timeout_s: float
) -> McpServers | None:
    """The servers ``config`` (MCP_CONFIG) names, attached to ``registry``, each call
    bounded by ``call_timeout_s`` (TOOL_TIMEOUT_S); None when there are none. A malformed
    file is a SettingsError."""
    servers = load_servers(config)
    if not servers:
        return None
    # importing the SDK takes seconds: only a bot with MCP servers pays for it
    # speed device: see bench/README.md, "MCP SDK imported on demand"
    from bot.tools.mcp.servers import McpServers

    source = McpServers(registry, servers, call_timeout_s=call_timeout_s)
    registry.add_source(source)
    return source
