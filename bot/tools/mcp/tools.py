"""An MCP server's tool as a registry tool: its name, description, reads or writes, and
its result as the model reads it. Pure functions."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container
from typing import Any

import mcp_types as types

from bot.errors import ToolError

#: the model APIs' limit on a function name
MAX_NAME = 64
#: a description longer than this is cut: every request of every turn sends it
DESCRIPTION_LIMIT = 1_024
#: an error text from a server longer than this is cut
ERROR_LIMIT = 2_000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST = 8


def exposed_name(server: str, tool: str, taken: Container[str]) -> str | None:
    """``SERVER__TOOL`` as the model APIs accept a name: characters outside
    ``[A-Za-z0-9_-]`` become ``_``, at most 64 characters. A name that had to be cut, or
    that another tool has, ends in a digest of the original instead; None when even that
    is taken."""
    name = _UNSAFE.sub("_", f"{server}__{tool}")
    if len(name) <= MAX_NAME and name not in taken:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()
    for size in (_DIGEST, _DIGEST * 2):
        candidate = f"{name[: MAX_NAME - size - 1]}_{digest[:size]}"
        if candidate not in taken:
            return candidate
    return None


def writes(tool: types.Tool) -> bool:
    """Every tool writes unless its annotations say it only reads (and not destructively)."""
    hints = tool.annotations
    return not (hints is not None and hints.read_only_hint is True and not hints.destructive_hint)


def description(server: str, tool: types.Tool) -> str:
    text = (tool.description or "").strip()
    if not text:
        title = tool.title or (tool.annotations.title if tool.annotations else None)
        text = title or f"The {tool.name} tool of the MCP server {server}."
    if len(text) > DESCRIPTION_LIMIT:
        text = text[: DESCRIPTION_LIMIT - 1] + "…"
    return text


def progress(server: str, tool: types.Tool) -> str:
    """The registry's progress line (a format string): "Running TOOL on SERVER"."""
    return f"Running {tool.name} on {server}".replace("{", "{{").replace("}", "}}")


def result_value(server: str, tool: str, result: types.CallToolResult) -> Any:
    """What the model reads: the structured content as JSON, else the text content joined;
    an ``isError`` result is a ToolError with the server's words."""
    if result.is_error:
        text = _text(result.content)[:ERROR_LIMIT]
        raise ToolError(text or f"{tool} on the MCP server {server} failed without saying why.")
    if result.structured_content is not None:
        return result.structured_content
    text = _text(result.content)
    return text if text else {"note": f"{tool} returned no content."}


def _text(content: list[types.ContentBlock]) -> str:
    parts = []
    for block in content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[{resource.mime_type or 'data'}: {resource.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        else:  # image, audio: no binary data for the model
            parts.append(f"[{block.type}: {block.mime_type}]")
    return "\n".join(parts)
