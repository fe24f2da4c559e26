"""Jira faults through the whole bot: ``bot ask`` in a subprocess, a scripted model on the
strict fake OpenAI server, and the strict fake Jira answering with the fault.

Each case: the fault injected -> what the model is sent and the person reads -> what the
database holds. In every case the Jira token appears nowhere: not in the output, not in
the stored history, not in a request to the model. (The tool-level details of each error
are in tests/unit/tools/test_jira.py; these cases check the path through the bot.)
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.cli.helpers import run_bot
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse
from tests.reliability.helpers import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    assert_paired,
    bot_env,
    dump,
    jira_env,
    stored,
    tool_result,
)

SECRETS = (JIRA_TOKEN, base64.b64encode(f"{JIRA_EMAIL}:{JIRA_TOKEN}".encode()).decode())


@pytest.fixture
def jira() -> Iterator[FakeJira]:
    with FakeJira(email=JIRA_EMAIL, api_token=JIRA_TOKEN, projects={"TASK": {}}) as fake:
        fake.add_issue("TASK-123", summary="Invoice export fails", status="In Progress")
        yield fake


@pytest.fixture
def env(sqlite_url: str, fake_openai: FakeOpenAI, jira: FakeJira) -> dict[str, str]:
    return {**bot_env(fake_openai, sqlite_url), **jira_env(jira.url)}


def explain(call_id: str) -> Callable[..., Reply]:
    """The scripted model's second answer: it repeats the result it was sent."""
    return lambda request: Reply(text="Jira says: " + json.dumps(tool_result(request, call_id)))


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def check_turn(
    result: subprocess.CompletedProcess[str],
    env: dict[str, str],
    channel: str,
    fake_openai: FakeOpenAI,
    call_id: str,
) -> dict[str, Any]:
    """The turn was answered, the call is stored with its result, no secret anywhere;
    returns the result the model was sent."""
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    sent = tool_result(fake_openai.requests[-1], call_id)
    assert result.stdout.strip() == "Jira says: " + json.dumps(sent)
    messages, turns = stored(env["DATABASE_URL"], channel)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert_paired(messages)
    assert messages[1].tool_calls[0].id == call_id
    assert json.loads(messages[2].content or "") == sent
    assert [t.outcome for t in turns] == ["answered"]
    requests = json.dumps([r.body for r in fake_openai.requests])
    assert_no_secret(result.stdout, result.stderr, dump(messages, turns), requests)
    return sent


@dataclass(frozen=True)
class Fault:
    inject: Callable[[FakeJira], None]
    key: str
    says: str
    api: str = "chat"
    settings: tuple[tuple[str, str], ...] = ()


READ_FAULTS = {
    "401": Fault(
        lambda j: j.fail_next(r"/issue/TASK-123$", 401),
        "TASK-123",
        "Jira authentication failed (HTTP 401)",
    ),
    "403": Fault(
        lambda j: j.fail_next(r"/issue/TASK-123$", 403),
        "TASK-123",
        "Jira denied permission to read TASK-123 (HTTP 403)",
        api="responses",
    ),
    "404": Fault(
        lambda j: None, "TASK-999", "Issue TASK-999 does not exist or you do not have permission"
    ),
    "429 Retry-After beyond the limit": Fault(
        lambda j: j.fail_next(r"/issue/TASK-123$", 429, headers={"Retry-After": "60"}),
        "TASK-123",
        "Jira is rate limiting, try again in 60 s.",
        api="responses",
        settings=(("TOOL_TIMEOUT_S", "5"),),
    ),
    "500": Fault(
        lambda j: j.fail_next(r"/issue/TASK-123$", 500),
        "TASK-123",
        "Jira failed with HTTP 500 while trying to read TASK-123",
    ),
    "never answers": Fault(
        lambda j: j.hang_next(30, r"/issue/TASK-123$"),
        "TASK-123",
        "Jira did not answer within 1.6 s",
        api="responses",
        settings=(("TOOL_TIMEOUT_S", "2"),),
    ),
}


@pytest.mark.parametrize("name", list(READ_FAULTS))
def test_a_failing_read_is_explained(
    name: str, env: dict[str, str], fake_openai: FakeOpenAI, jira: FakeJira, tmp_path
) -> None:
    """Jira answers a read with 401 / 403 / 404 / 429 (Retry-After past TOOL_TIMEOUT_S) /
    500, or never (TOOL_TIMEOUT_S=2) -> the model is sent ``{"error": ...}`` saying what
    happened and the person reads its explanation (exit 0) -> stored: the user message,
    the call, its error result, the answer; turn ``answered``; the token nowhere."""
    fault = READ_FAULTS[name]
    fault.inject(jira)
    fake_openai.script(ToolUse("jira_get_issue", {"issue_key": fault.key}, "get"), explain("get"))
    started = time.monotonic()
    result = run_bot(
        "ask",
        "--channel",
        "CJ",
        f"what is the status of {fault.key}?",
        env={**env, "LLM_API": fault.api, **dict(fault.settings)},
        cwd=tmp_path,
    )
    sent = check_turn(result, env, "CJ", fake_openai, "get")
    assert fault.says in sent["error"]
    assert time.monotonic() - started < 15  # no retrying 429s or hangs past the limit
    assert jira.calls("GET", f"/issue/{fault.key}$")


def test_rate_limit_within_the_limit_is_waited_out(
    env: dict[str, str], fake_openai: FakeOpenAI, jira: FakeJira, tmp_path
) -> None:
    """429 with Retry-After: 1 on a read -> the tool waits 1 s and asks again -> the model
    gets the issue, the person an answer -> stored as a normal tool round."""
    jira.fail_next(r"/issue/TASK-123$", 429, headers={"Retry-After": "1"})
    fake_openai.script(ToolUse("jira_get_issue", {"issue_key": "TASK-123"}, "get"), explain("get"))
    started = time.monotonic()
    result = run_bot("ask", "--channel", "CJ", "status of TASK-123?", env=env, cwd=tmp_path)
    sent = check_turn(result, env, "CJ", fake_openai, "get")
    assert sent["status"] == "In Progress" and "error" not in sent
    assert len(jira.calls("GET", "/issue/TASK-123$")) == 2
    assert time.monotonic() - started >= 1.0


def test_connection_reset_during_a_create_makes_one_issue(
    env: dict[str, str], fake_openai: FakeOpenAI, jira: FakeJira, tmp_path
) -> None:
    """``bot ask --approve``; Jira stores the new issue, then drops the connection before
    answering -> the tool finds the issue by its marker label instead of sending the create
    again -> the model is told it exists (and was not re-sent) -> exactly one issue in
    Jira, one POST; stored: the call and that result."""
    jira.reset_connection_next(r"/issue$", method="POST")
    create = {"summary": "Printer on fire", "description": "Floor 3, since this morning."}
    fake_openai.script(ToolUse("jira_create_issue", create, "new"), explain("new"))
    result = run_bot(
        "ask",
        "--channel",
        "CJ",
        "--approve",
        "open a ticket: printer on fire",
        env={**env, "LLM_API": "responses"},
        cwd=tmp_path,
    )
    sent = check_turn(result, env, "CJ", fake_openai, "new")
    assert jira.created == ["TASK-124"]
    assert len(jira.calls("POST", r"/issue$")) == 1
    assert sent["key"] == "TASK-124" and "not sent again" in sent["note"]
