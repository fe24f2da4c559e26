"""Run the real ``bot`` entry point in a subprocess, with a clean environment."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from bot.store.crm import CrmStore
from bot.store.db import create_engine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: settings that would leak in from a developer's shell and change what is tested
_SCRUBBED_PREFIXES = (
    "SLACK_",
    "OPENAI_",
    "JIRA_",
    "CRM",
    "SALESFORCE_",
    "HUBSPOT_",
    "ADMIN_",
    "DATABASE_URL",
    "LLM_API",
    "MAX_TOOL_ROUNDS",
    "HISTORY_TOKEN_BUDGET",
    "SYSTEM_PROMPT",
    "WRITE_",
    "STREAM_",
    "LOG_",
    "MCP_",
    "OTEL_",
    "METRICS_",
    "MAX_",
    "RATE_",
    "HOST",
)


def run_bot(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path,
    input: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python -m bot ARGS`` in ``cwd`` (where a ``.env`` may lie), with ``env`` added."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def import_examples(env: dict[str, str], cwd: Path) -> None:
    """``bot crm import`` of the sample contacts and accounts in ``examples/``."""
    imported = run_bot(
        "crm",
        "import",
        "--contacts",
        str(EXAMPLES / "contacts.csv"),
        "--accounts",
        str(EXAMPLES / "accounts.csv"),
        env=env,
        cwd=cwd,
    )
    assert imported.returncode == 0, imported.stderr


def load_examples(database_url: str) -> None:
    """The same rows as ``import_examples``, put in from this process: for the tests that
    only need them there, without starting a ``bot`` process for it."""

    async def load() -> None:
        engine = create_engine(database_url)
        try:
            await CrmStore(engine).import_csv(EXAMPLES / "contacts.csv", EXAMPLES / "accounts.csv")
        finally:
            await engine.dispose()

    asyncio.run(load())


def one_line(stderr: str) -> str:
    """The only line of ``stderr``, which holds no traceback."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]
