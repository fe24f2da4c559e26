"""What the reliability tests share: the bot in a subprocess (run to its end, or started
to be killed), polling with a time limit, stored sessions read back, and the checks every
stored history must pass."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.messages import Message
from bot.store.db import create_engine
from bot.store.history import HistoryStore
from bot.turn import TurnState
from tests.cli.helpers import _SCRUBBED_PREFIXES
from tests.fakes.openai_server import FakeOpenAI, Request

#: for the tests that start several ``bot`` processes at once: one worker runs them one after
#: another, since side by side they would load the two cores (and take PostgreSQL's
#: connections) past the deadlines they check, such as Slack's 3 s for an ack
MANY_PROCESSES = pytest.mark.xdist_group("many_processes")

JIRA_EMAIL = "bot@example.com"
#: the Jira token: it must never show in output, stored history or a model request
JIRA_TOKEN = "jira-tok-4f1e9c2ab7-SECRET"


def bot_env(fake: FakeOpenAI, database_url: str, **extra: str) -> dict[str, str]:
    """The settings of a ``bot`` subprocess talking to the fake model."""
    return {
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": fake.base_url,
        "DATABASE_URL": database_url,
        **extra,
    }


def jira_env(url: str, **extra: str) -> dict[str, str]:
    return {
        "JIRA_URL": url,
        "JIRA_EMAIL": JIRA_EMAIL,
        "JIRA_API_TOKEN": JIRA_TOKEN,
        "JIRA_PROJECT": "TASK",
        **extra,
    }


def popen_bot(
    *args: str, env: dict[str, str], cwd: Path, stdin: bool = False
) -> subprocess.Popen[str]:
    """``python -m bot ARGS`` started in the background (to be waited for or killed);
    ``stdin``: its input is given to ``finish``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    return subprocess.Popen(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env={**base, **env},
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(
    process: subprocess.Popen[str], timeout: float = 60, input: str | None = None
) -> tuple[int, str, str]:
    """Wait for a started bot (typing ``input`` into it): (exit status, stdout, stderr)."""
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"bot did not finish in {timeout} s:\n{out}\n{err}") from None
    return process.returncode, out, err


def wait_for(
    condition: Callable[[], Any], what: str, timeout: float = 60, every: float = 0.02
) -> Any:
    """Poll ``condition`` until it is truthy (and return it); fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


async def until(
    condition: Callable[[], Any | Awaitable[Any]],
    what: str,
    timeout: float = 30,  # noqa: ASYNC109 - a polling deadline, as in the Slack scenarios
) -> Any:
    """``wait_for`` from async code: poll ``condition`` (a function or a coroutine function)
    until it is truthy, and return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


async def read_session(database_url: str, channel: str) -> tuple[list[Message], list[TurnState]]:
    store = HistoryStore(create_engine(database_url))
    try:
        return await store.messages(channel), await store.turns(channel)
    finally:
        await store.engines.dispose()


def stored(database_url: str, channel: str) -> tuple[list[Message], list[TurnState]]:
    """A channel's stored messages and turns (from synchronous code)."""
    return asyncio.run(read_session(database_url, channel))


def assert_paired(messages: Sequence[Message]) -> None:
    """Every assistant message that calls tools is followed by exactly one result per call,
    in call order, and there is no result without its call."""
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message.role != "tool", f"orphan tool result at {index}: {message}"
        index += 1
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                assert index < len(messages), f"call {call.id} has no result"
                result = messages[index]
                assert result.role == "tool" and result.tool_call_id == call.id, (
                    f"call {call.id} is followed by {result}"
                )
                index += 1


def tool_result(request: Request, call_id: str) -> dict[str, Any]:
    """The result the model was sent for ``call_id``, in either API mode."""
    for item in request.body.get("messages") or request.body.get("input") or []:
        if item.get("role") == "tool" and item.get("tool_call_id") == call_id:
            return json.loads(item["content"])
        if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
            return json.loads(item["output"])
    raise AssertionError(f"the model was not sent a result for {call_id}")


def last_user_text(request: Request) -> str:
    """The newest user message of a request, in either API mode."""
    items = request.body.get("messages") or request.body.get("input") or []
    for item in reversed(items):
        if item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content)
            return content or ""
    return ""


def dump(messages: Sequence[Message], turns: Sequence[TurnState] = ()) -> str:
    """Everything stored for a session as one text (to search for what must not be there)."""
    return json.dumps(
        [m.to_dict() for m in messages] + [t.error or "" for t in turns],
        default=str,
        ensure_ascii=False,
    )
