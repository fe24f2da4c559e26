"""Helpers around tests/fakes/mcp_server.py: MCP_CONFIG entries for it, its recording of
the calls it received, and the Streamable HTTP server as a process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("mcp_server.py")
#: how long the HTTP server may take to start answering
START_S = 30.0


class Recording:
    """The calls the fake server received, in the JSON-lines file it appends to."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def tools(self) -> list[str]:
        return [call["tool"] for call in self.calls()]


def stdio_entry(recording: Recording, delay_s: float = 0.0, **extra: Any) -> dict[str, Any]:
    """An mcpServers entry that starts the fake server over stdio (``delay_s``: that slow
    to answer ``initialize``; ``math.inf``: never)."""
    return {
        "command": sys.executable,
        "args": [str(SERVER), "stdio", str(delay_s)],
        "env": {"RECORD_FILE": str(recording.path)},
        **extra,
    }


def write_config(directory: Path, servers: dict[str, Any]) -> Path:
    path = directory / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpServer:
    """The fake server over Streamable HTTP at ``url``, as a process of its own."""

    def __init__(self, recording: Recording, port: int | None = None) -> None:
        self.recording = recording
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        env = {"RECORD_FILE": str(self.recording.path), "PATH": os.environ.get("PATH", "")}
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "http", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the fake MCP server exited ({self.process.returncode})")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the fake MCP server did not listen on {self.port} in {START_S} s")

    def kill(self) -> None:
        """Gone at once, as a crash would leave it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


async def eventually(condition: Any, within_s: float = 20.0, step: float = 0.05) -> bool:
    """Poll ``condition()`` (the event loop running meanwhile) until it is true or
    ``within_s`` have passed."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(step)
    return bool(condition())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
