"""The SDK's ``Client`` for one server over its transport (stdio or Streamable HTTP), told
when the server's side ends; and why a connection failed, in a few words."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bot.tools.mcp.config import ServerConfig

#: the small program that gives a stdio server only the environment MCP_CONFIG names
LAUNCHER = Path(__file__).with_name("launch.py")


class CommandNotFound(Exception):
    """A stdio server's command does not exist."""


@asynccontextmanager
async def open_client(
    config: ServerConfig,
    on_end: Callable[[], None],
    *,
    connect_timeout_s: float,
    call_timeout_s: float,
) -> AsyncIterator[Client]:
    """A connected client (handshake done); ``on_end`` is called when the server's side of
    the transport ends (a stdio server that exited), so the next call reconnects rather
    than fails. ``connect_timeout_s`` bounds each request of the handshake."""
    _check_command(config)
    client = Client(
        _watched(_transport(config, connect_timeout_s, call_timeout_s), on_end),
        read_timeout_seconds=connect_timeout_s,
        client_info=types.Implementation(name="bot", version=version("bot")),
        cache=None,
    )
    async with client:
        yield client


def _check_command(config: ServerConfig) -> None:
    command = config.command
    if command is None:
        return
    path = config.env.get("PATH")  # None: the bot's own PATH
    if shutil.which(command, path=path) is None:
        raise CommandNotFound(f"the command {command!r} is not found on PATH")


@asynccontextmanager
async def _transport(
    config: ServerConfig, connect_timeout_s: float, call_timeout_s: float
) -> AsyncIterator[Any]:
    async with AsyncExitStack() as stack:
        if config.command is not None:
            # only the variables the file names reach the server, and PATH: see launch.py
            names = ",".join(sorted({*config.env, "PATH"}))
            params = StdioServerParameters(
                command=sys.executable,
                args=["-I", "-S", str(LAUNCHER), names, "--", config.command, *config.args],
                env=config.env,
                cwd=config.cwd,
            )
            streams = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        else:
            assert config.url is not None
            timeout = httpx2.Timeout(connect_timeout_s, read=call_timeout_s + 5)
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=config.headers, timeout=timeout)
            )
            streams = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=http)
            )
        yield streams


@asynccontextmanager
async def _watched(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield _EndWatch(read_stream, on_end), write_stream


class _EndWatch:
    """A read stream that calls ``on_end`` at its end of stream."""

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end = on_end

    def __getattr__(self, name: str) -> Any:  # last_context and the like
        return getattr(self._stream, name)

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except StopAsyncIteration:
            self._on_end()
            raise

    async def __aenter__(self) -> _EndWatch:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self._on_end()
        suppress: bool | None = await self._stream.__aexit__(*exc_info)
        return suppress


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def only_refused(exc: BaseException) -> bool:
    """Whether a connection ended by ``exc`` failed before anything reached the server."""
    leaves = _leaves(exc)
    return bool(leaves) and all(isinstance(e, httpx2.ConnectError) for e in leaves)


def reason(exc: BaseException, timeout_s: float) -> str:
    """Why a connection could not be made, in a few words; never a header or a URL."""
    leaf = _leaves(exc)[0]
    if isinstance(leaf, CommandNotFound):
        return str(leaf)
    if isinstance(leaf, httpx2.ConnectError | ConnectionRefusedError):
        return "connection refused or host unreachable"
    if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(leaf, httpx2.HTTPStatusError):
        status = leaf.response.status_code
        hint = " (check its headers)" if status in {401, 403} else ""
        return f"HTTP {status}{hint}"
    if isinstance(leaf, MCPError):
        if leaf.code == types.CONNECTION_CLOSED:
            return "the server closed the connection (its own error output says why)"
        if leaf.code == types.REQUEST_TIMEOUT:
            return f"no answer within {timeout_s:g} s"
        return f"it answered with an error: {' '.join(leaf.message.split())[:200]}"
    if isinstance(leaf, OSError):
        return leaf.strerror or type(leaf).__name__
    return type(leaf).__name__
