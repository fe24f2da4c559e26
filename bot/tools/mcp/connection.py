"""One MCP server's session (the official ``mcp`` SDK's ``Client``), kept by one task.

::

    connecting --ok--> connected --lost: the server exited, or a call--> idle
        ^  |               (one info)     found the connection broken  (one warning)
        |  +--failed--> down (one warning)                                 |
        |                 |  retried on a doubling timer, or at once by a call
        +-----------------+------------------------------------------------+
                                                          idle: at the next call

The task owns the SDK's context managers (they must be entered and left in one task);
calls come from any task and share the session. A call that finds the server gone waits
for the next connection, within the registry's time limit. A call whose connection breaks
under it is sent again on the new connection only when that cannot do anything twice: a
read, or a write that never reached the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from mcp import Client, MCPError

from bot.errors import ToolError
from bot.tools.mcp.config import ServerConfig
from bot.tools.mcp.transport import only_refused, open_client, reason

log = logging.getLogger(__name__)

#: pages of tools/list read at most (a server that pages forever cannot hang start-up)
MAX_TOOL_PAGES = 50
#: how long a failed call waits for the connection's end to be understood
_LOSS_GRACE_S = 2.0
#: the SDK's error for a session the HTTP server no longer knows (it restarted)
_TERMINATED = "Session terminated"


@dataclass
class _Link:
    """One connection: its client, and how it ended."""

    client: Client
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    #: the connection failed before anything was sent on it (connection refused)
    unsent: bool = False


class McpConnection:
    """Connects to one server in the background and calls its tools.

    ``on_tools`` receives the server's tools at each connection and says how many of them
    are offered. ``connect_timeout_s`` bounds the start of the server and every request of
    the handshake; ``call_timeout_s`` one call (the registry's own limit normally ends it
    first).
    """

    def __init__(
        self,
        config: ServerConfig,
        on_tools: Callable[[list[types.Tool]], int],
        *,
        connect_timeout_s: float = 30.0,
        call_timeout_s: float = 30.0,
        retry_s: tuple[float, float] = (2.0, 300.0),
    ) -> None:
        self.config = config
        self.name = config.name
        #: "NAME (stdio)": how the log names it
        self.label = f"{config.name} ({config.transport})"
        self.on_tools = on_tools
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.retry_s = retry_s
        #: why the server is not connected, for people; None while it is
        self.problem: str | None = "not connected yet"
        self._link: _Link | None = None
        self._wanted = asyncio.Event()
        self._attempt_end = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._link is not None and not self._link.lost.is_set()

    @property
    def state(self) -> Literal["connecting", "connected", "failed"]:
        """Connecting until the first attempt ends; failed when down (``problem`` says why)
        or when the connection ended and waits for the next call."""
        if self.connected:
            return "connected"
        return "failed" if self._first_attempt.is_set() else "connecting"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp server {self.name}")

    async def first_attempt(self) -> None:
        """Return once the first connection attempt has ended, either way."""
        await self._first_attempt.wait()

    async def close(self, grace_s: float = 8.0) -> None:
        """End the session (a stdio server's process is stopped) and the task."""
        self._closing.set()
        self._wanted.set()
        if self._link is not None:
            self._link.lost.set()
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=grace_s)
        if not done:  # a server stuck in its start: give up on it
            task.cancel()
            await asyncio.wait({task}, timeout=grace_s)

    async def call(self, tool: str, arguments: dict[str, Any], *, writes: bool) -> Any:
        """The server's CallToolResult for one call; ToolError when there is none."""
        link = await self._connection()
        try:
            return await self._send(link, tool, arguments)
        except _Lost as lost:
            link.lost.set()
            if writes and not (lost.unsent or await self._never_sent(link)):
                raise ToolError(
                    f"The connection to the MCP server {self.name} broke during the call, so "
                    f"it is not known whether {tool} was done. It was not sent again: check "
                    "before asking for it again."
                ) from None
        log.info("MCP server %s lost its connection during %s: sent again", self.label, tool)
        link = await self._connection()
        try:
            return await self._send(link, tool, arguments)
        except _Lost:
            link.lost.set()
            raise ToolError(
                f"The connection to the MCP server {self.name} broke again. Try again later."
            ) from None

    # ---- calls

    async def _connection(self) -> _Link:
        """The live connection, waiting for the next attempt when there is none."""
        for _ in range(2):  # a connection lost while it was being handed over: once more
            link = self._link
            if link is not None and not link.lost.is_set():
                return link
            if self._closing.is_set():
                raise ToolError(f"The MCP server {self.name} is shutting down.")
            attempt = self._attempt_end
            self._wanted.set()
            await attempt.wait()
        link = self._link
        if link is None or link.lost.is_set():
            raise ToolError(
                f"The MCP server {self.name} cannot be reached ({self.problem}). Try again later."
            )
        return link

    async def _send(self, link: _Link, tool: str, arguments: dict[str, Any]) -> Any:
        try:
            return await link.client.call_tool(
                tool, arguments, read_timeout_seconds=self.call_timeout_s
            )
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise _Lost(unsent=False) from None
            if exc.code == types.INVALID_REQUEST and exc.message == _TERMINATED:
                raise _Lost(unsent=True) from None  # a restarted server: it ran nothing
            if exc.code == types.REQUEST_TIMEOUT:
                raise ToolError(
                    f"The MCP server {self.name} did not answer within {self.call_timeout_s:g} s."
                ) from None
            raise ToolError(
                f"The MCP server {self.name} refused the call: {exc.message[:500]}"
            ) from None
        except RuntimeError:  # the client was closed under the call
            raise _Lost(unsent=False) from None

    async def _never_sent(self, link: _Link) -> bool:
        """Whether the connection ended before anything reached the server."""
        try:
            await asyncio.wait_for(link.ended.wait(), _LOSS_GRACE_S)
        except TimeoutError:
            return False
        return link.unsent

    # ---- the connection's task

    async def _run(self) -> None:
        delay, warned = self.retry_s[0], False
        while not self._closing.is_set():
            was_up = await self._connect_and_serve()
            if self._closing.is_set():
                break
            if was_up:
                delay, warned = self.retry_s[0], False
                log.warning(
                    "MCP server %s dropped: %s; it is connected again at the next call",
                    self.label,
                    self.problem,
                )
                await self._wanted.wait()
                continue
            self._end_attempt()
            if not warned:
                log.warning(
                    "MCP server %s failed to connect: %s; the bot goes on without its tools "
                    "and tries again in the background",
                    self.label,
                    self.problem,
                )
                warned = True
            else:
                log.info("MCP server %s still fails to connect: %s", self.label, self.problem)
            try:
                await asyncio.wait_for(self._wanted.wait(), delay)
            except TimeoutError:
                pass
            delay = min(delay * 2, self.retry_s[1])

    async def _connect_and_serve(self) -> bool:
        """One connection, kept until it is lost: True when it was up, False when it could
        not be made (``problem`` says why)."""
        link: _Link | None = None
        dropped = "the server ended the connection"
        try:
            lost = asyncio.Event()
            async with open_client(
                self.config,
                lost.set,
                connect_timeout_s=self.connect_timeout_s,
                call_timeout_s=self.call_timeout_s,
            ) as client:
                offered = self.on_tools(await _all_tools(client))
                link = _Link(client, lost=lost)
                self._link, self.problem = link, None
                log.info("MCP server %s connected: %d tools offered", self.label, offered)
                self._end_attempt()
                if self._closing.is_set():  # close() came during the handshake, saw no link
                    lost.set()
                await lost.wait()
        except Exception as exc:
            if link is not None:
                link.unsent = only_refused(exc)
                dropped = reason(exc, self.call_timeout_s)
            else:
                self.problem = reason(exc, self.connect_timeout_s)
            # the warning has the reason in a few words; the whole story at DEBUG
            log.debug("MCP server %s: the connection failed", self.label, exc_info=True)
        finally:
            self._link = None
            if link is not None:
                link.lost.set()
                link.ended.set()
        if link is not None:
            self.problem = dropped
        return link is not None

    def _end_attempt(self) -> None:
        self._attempt_end.set()
        self._attempt_end = asyncio.Event()
        self._wanted.clear()
        self._first_attempt.set()


class _Lost(Exception):
    """The connection broke under a call; ``unsent``: the call never reached the server."""

    def __init__(self, *, unsent: bool) -> None:
        super().__init__()
        self.unsent = unsent


async def _all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
