"""MCP servers (MCP_CONFIG) as tools, on the official ``mcp`` SDK: see servers.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.config import Settings
from bot.tools.base import ToolRegistry
from bot.tools.mcp.config import ServerConfig, load_servers

if TYPE_CHECKING:
    from bot.tools.mcp.servers import McpServers

__all__ = ["ServerConfig", "load_servers", "mcp_servers"]


def mcp_servers(settings: Settings, registry: ToolRegistry) -> McpServers | None:
    """The servers MCP_CONFIG names, attached to ``registry``; None when there are none.
    A malformed file is a SettingsError."""
    servers = load_servers(settings.MCP_CONFIG)
    if not servers:
        return None
    # importing the SDK costs 1.3-1.6 s here (python -X importtime): only a bot with MCP
    # servers pays for it
    from bot.tools.mcp.servers import McpServers

    source = McpServers(registry, servers, call_timeout_s=settings.TOOL_TIMEOUT_S)
    registry.add_source(source)
    return source
