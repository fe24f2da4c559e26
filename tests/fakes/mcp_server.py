"""A real MCP server for the tests, built with the ``mcp`` SDK's server side (MCPServer,
which mcp 2 calls what was FastMCP). Run by path, it imports nothing of the bot or the
tests:

    python tests/fakes/mcp_server.py stdio [DELAY_S]  # DELAY_S before it reads a request
    python tests/fakes/mcp_server.py http PORT        # Streamable HTTP on 127.0.0.1:PORT/mcp

A DELAY_S makes a server slow to start: ``initialize`` waits that long for its answer
(``inf``: a server that hangs, never answering).

Every call a tool receives is appended, as it arrives, to the JSON-lines file named by
RECORD_FILE (when set), so a test can tell whether the server saw a call at all.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations

READS = ToolAnnotations(read_only_hint=True)
#: read-only and destructive at once: the bot must treat it as a write
CONFUSED = ToolAnnotations(read_only_hint=True, destructive_hint=True)
LONG_NAME = "find_" + "x" * 70

server = MCPServer("fake", log_level="WARNING")


def record(tool: str, **arguments: Any) -> None:
    path = os.environ.get("RECORD_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool(annotations=READS)
def lookup(key: str) -> dict[str, str]:
    """Look a ticket up by its key."""
    record("lookup", key=key)
    return {"key": key, "status": "open"}


@server.tool(annotations=READS, structured_output=False)
def note(text: str) -> list[str]:
    """Say something back, as two blocks of plain text."""
    record("note", text=text)
    return [f"noted: {text}", "(that is all)"]


@server.tool(structured_output=False)
def create_ticket(summary: str) -> str:
    """Create a ticket (a write: no annotations)."""
    record("create_ticket", summary=summary)
    return f"created: {summary}"


@server.tool(annotations=CONFUSED)
def purge(days: int) -> str:
    """Delete old tickets."""
    record("purge", days=days)
    return "purged"


@server.tool(annotations=READS)
def explode(reason: str) -> str:
    """A tool that raises."""
    record("explode", reason=reason)
    raise ValueError(reason)


@server.tool(annotations=READS, structured_output=False)
def refuse(key: str) -> CallToolResult:
    """A tool that answers with an isError result."""
    record("refuse", key=key)
    return CallToolResult(content=[TextContent(text=f"no ticket {key}")], is_error=True)


@server.tool(annotations=READS)
async def slow(seconds: float) -> str:
    """A tool that takes its time."""
    record("slow", seconds=seconds)
    await asyncio.sleep(seconds)
    return "finally"


@server.tool(annotations=READS)
def whoami() -> dict[str, Any]:
    """This process: its id and the names of its environment variables."""
    record("whoami")
    return {"pid": os.getpid(), "env": sorted(os.environ)}


@server.tool(name="search.v2", annotations=READS)
def search_v2(query: str) -> str:
    """A name with a dot, which the model APIs do not accept."""
    record("search.v2", query=query)
    return f"found {query}"


@server.tool(name=LONG_NAME, annotations=READS)
def long_name() -> str:
    """A name longer than the model APIs accept."""
    record(LONG_NAME)
    return "long"


@server.tool(annotations=READS)
def odd_schema(value: str) -> str:
    """Its input schema is replaced below by one the model APIs refuse."""
    return value


# not valid JSON Schema ("strng"): the bot must not send it to the model
server._tool_manager.get_tool("odd_schema").parameters = {
    "type": "object",
    "properties": {"value": {"type": "strng"}},
}


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        # nothing of stdin is read meanwhile: initialize waits
        delay_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
        while math.isinf(delay_s):
            time.sleep(3600)
        time.sleep(delay_s)
        server.run("stdio")
