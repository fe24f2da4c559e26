"""The MCP_CONFIG file: the common ``mcpServers`` format, read into ServerConfig values.

::

    {"mcpServers": {
       "atlassian": {"command": "uvx", "args": ["mcp-atlassian"], "env": {...},
                     "allow": ["jira_get_issue"]},
       "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ..."},
                "deny": ["delete_page"]}}}

A key this file does not know is an error rather than ignored: a mistyped ``"alow"`` must
not quietly offer every tool. Any mistake is one SettingsError naming MCP_CONFIG.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bot.errors import SettingsError

_STDIO_KEYS = {"command", "args", "env", "cwd"}
_HTTP_KEYS = {"url", "headers"}
_COMMON_KEYS = {"allow", "deny", "type", "disabled"}
#: the "type" values other clients write for each transport
_STDIO_TYPES = {"stdio"}
_HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamableHttp"}


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: started over stdio (``command``) or reached over HTTP (``url``)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    #: the whole environment of a stdio server, besides PATH (see launch.py)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: the server's own tool names; None offers every tool
    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def offers(self, tool: str) -> bool:
        return (self.allow is None or tool in self.allow) and tool not in self.deny


def load_servers(path: Path | None) -> list[ServerConfig]:
    """The servers MCP_CONFIG names (none when it is unset); SettingsError when it is wrong."""
    if path is None:
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _error(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    except UnicodeDecodeError:
        raise _error("is not UTF-8 text") from None
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise _error(
            f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except ValueError as exc:
        raise _error(str(exc)) from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise _error('has no "mcpServers" object')
    return [
        _server(name, entry)
        for name, entry in servers.items()
        if not (isinstance(entry, dict) and entry.get("disabled") is True)
    ]


def _server(name: str, entry: Any) -> ServerConfig:
    where = f"server {name!r}"
    if not name.strip():
        raise _error("names a server with an empty name")
    if not isinstance(entry, dict):
        raise _error(f"{where} is not an object")
    unknown = sorted(set(entry) - _STDIO_KEYS - _HTTP_KEYS - _COMMON_KEYS)
    if unknown:
        raise _error(f"{where} has an unknown key {unknown[0]!r}")
    if ("command" in entry) == ("url" in entry):
        raise _error(f'{where} needs either "command" (stdio) or "url" (HTTP)')
    allow = _strings(entry, "allow", where)
    common: dict[str, Any] = {
        "name": name,
        "allow": None if allow is None else frozenset(allow),
        "deny": frozenset(_strings(entry, "deny", where) or ()),
    }
    kind = entry.get("type")
    if "command" in entry:
        _check_type(kind, _STDIO_TYPES, where)
        _only(entry, _STDIO_KEYS, where, "a stdio server")
        return ServerConfig(
            command=_text(entry, "command", where),
            args=tuple(_strings(entry, "args", where) or ()),
            env=_mapping(entry, "env", where),
            cwd=_text(entry, "cwd", where) if "cwd" in entry else None,
            **common,
        )
    _check_type(kind, _HTTP_TYPES, where)
    _only(entry, _HTTP_KEYS, where, "an HTTP server")
    url = _text(entry, "url", where)
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise _error(f"{where} has a url that is not http(s)://host/...: {url[:80]!r}")
    return ServerConfig(url=url, headers=_mapping(entry, "headers", where), **common)


def _check_type(kind: Any, accepted: set[str], where: str) -> None:
    if kind is None or kind in accepted:
        return
    if kind == "sse":
        raise _error(f"{where} uses the SSE transport, which is not supported: use its /mcp URL")
    raise _error(f"{where} has a type {kind!r} that does not match its command or url")


def _only(entry: dict[str, Any], keys: set[str], where: str, kind: str) -> None:
    other = sorted(set(entry) & ((_STDIO_KEYS | _HTTP_KEYS) - keys))
    if other:
        raise _error(f"{where} is {kind}, so {other[0]!r} does not apply")


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _error(f"{where}: {key!r} must be a non-empty string")
    return value


def _strings(entry: dict[str, Any], key: str, where: str) -> list[str] | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _error(f"{where}: {key!r} must be a list of strings")
    return value


def _mapping(entry: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _error(f'{where}: {key!r} must be an object of strings, like {{"NAME": "value"}}')
    return dict(value)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"names {key!r} twice in one object")
        seen[key] = value
    return seen


def _error(problem: str) -> SettingsError:
    return SettingsError(f'MCP_CONFIG {problem}; the README\'s "MCP servers" shows the format.')
