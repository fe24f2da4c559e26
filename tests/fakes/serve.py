"""Serve an ASGI app over real HTTP from a background thread, for tests.

    with serve_in_thread(app) as served:
        httpx.get(served.url + "/health")

The app runs under uvicorn on its own event loop in a daemon thread, so it works the same from
sync and async tests (whatever loop pytest-asyncio gives the test). The port is chosen by the OS:
we bind a socket to port 0 ourselves and hand it to uvicorn, so there is no race for the port.
With ``tls=`` (tests/fakes/tls.py) it serves HTTPS with a certificate of the test run's CA.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import uvicorn

if TYPE_CHECKING:
    from tests.fakes.tls import ServerCertificate

__all__ = ["ServedApp", "StopsOnExit", "serve_in_thread"]


class StopsOnExit:
    """A context manager whose exit calls ``self.stop()`` (every fake server is one)."""

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _ThreadServer(uvicorn.Server):
    """uvicorn.Server whose main loop wakes as soon as stop() is called, not on its 0.1 s tick."""

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def request_exit(self) -> None:
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(wake.set)


class ServedApp(StopsOnExit):
    """A running server. `.url` is "http://HOST:PORT" (no trailing slash)."""

    def __init__(
        self,
        server: _ThreadServer,
        thread: threading.Thread,
        host: str,
        port: int,
        scheme: str = "http",
    ):
        self._server = server
        self._thread = thread
        self.host = host
        self.port = port
        self.url = f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask uvicorn to exit and wait for the thread. Idempotent."""
        if not self._thread.is_alive():
            return
        self._server.request_exit()
        self._thread.join(timeout)
        if self._thread.is_alive():
            # Stop waiting for in-flight requests; asyncio.run then cancels what is left.
            self._server.force_exit = True
            self._thread.join(timeout)

    def __repr__(self) -> str:
        return f"ServedApp({self.url!r}, running={self.running})"


def serve_in_thread(
    asgi_app: Any,
    host: str = "127.0.0.1",
    *,
    port: int = 0,
    lifespan: str = "auto",
    log_level: str = "warning",
    graceful_timeout: int = 1,
    startup_timeout: float = 10.0,
    tls: ServerCertificate | None = None,
    keep_alive_s: int = 5,
) -> ServedApp:
    """Start `asgi_app` under uvicorn in a daemon thread and wait until it accepts connections.

    `graceful_timeout` bounds how long stop() waits for in-flight requests before cancelling them;
    `keep_alive_s` how long an idle connection is kept (uvicorn's default, 5 s).
    """
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto is
    # TCP, and without it every keep-alive request waits ~40 ms for a delayed ACK.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    bound_port = sock.getsockname()[1]

    config = uvicorn.Config(
        asgi_app,
        lifespan=lifespan,
        log_level=log_level,
        log_config=None,  # leave the process' logging configuration alone
        access_log=False,
        timeout_graceful_shutdown=graceful_timeout,
        ws="none",
        timeout_keep_alive=keep_alive_s,
        ssl_certfile=str(tls.cert_file) if tls else None,
        ssl_keyfile=str(tls.key_file) if tls else None,
    )
    server = _ThreadServer(config)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # SystemExit from a failed lifespan startup, too
            failure.append(exc)
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    thread = threading.Thread(target=run, name=f"serve-{bound_port}", daemon=True)
    thread.start()

    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"ASGI server failed to start: {failure[0] if failure else '?'}")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"ASGI server did not start within {startup_timeout}s")
        time.sleep(0.005)

    # `started` is set once the listening server exists; make sure a connection is accepted.
    connect_host = "127.0.0.1" if host == "0.0.0.0" else ("::1" if host == "::" else host)
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(startup_timeout)
        probe.connect((connect_host, bound_port))

    return ServedApp(server, thread, connect_host, bound_port, "https" if tls else "http")
