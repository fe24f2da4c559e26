"""A channel with settings of its own (set with ``bot channels set``) from the command line:
in ``bot ask`` and ``bot chat`` its instructions, tools, Jira project and write approval
apply as they do in Slack (real subprocesses against the strict fake OpenAI and the strict
fake Jira), and ``bot history`` shows them with the session."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import run_bot
from tests.cli.test_core_commands import stored
from tests.cli.test_flows import jira_env, tool_result
from tests.cli.test_history_cli import seed
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse

TICKET = {"summary": "Invoice export fails", "description": "Since Tuesday."}


@pytest.fixture
def jira() -> Iterator[FakeJira]:
    projects = {"TASK": {}, "SUP": {}}
    with FakeJira(email="bot@example.com", api_token="jira-secret", projects=projects) as fake:
        yield fake


@pytest.fixture
def env(database_url: str, fake_openai: FakeOpenAI, jira: FakeJira) -> dict[str, str]:
    return jira_env(database_url, fake_openai, jira, JIRA_ALLOWED_PROJECTS="TASK,SUP")


def set_channel(env: dict[str, str], cwd: Path, *assignments: str) -> None:
    done = run_bot("channels", "set", "C1", *assignments, "--wait", "0", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr


def script_a_ticket(fake_openai: FakeOpenAI, call_id: str = "create") -> None:
    """The model asks for a ticket (no project named), then says what came of it."""

    def outcome(request: Request) -> Reply:
        result = tool_result(request, call_id)
        return Reply(text=f"Created {result['key']}." if "key" in result else result["error"])

    fake_openai.script(ToolUse("jira_create_issue", TICKET, call_id), outcome)


def test_ask_reads_the_channels_instructions_tools_and_project(
    env: dict[str, str], fake_openai: FakeOpenAI, jira: FakeJira, tmp_path: Path
) -> None:
    set_channel(
        env,
        tmp_path,
        "instructions=Answer in Portuguese.",
        "tools=jira_create_issue,get_current_time",
        "jira_project=sup",
    )
    script_a_ticket(fake_openai)

    result = run_bot("ask", "--channel", "C1", "--approve", "open a ticket", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Created SUP-1."
    assert jira.created == ["SUP-1"]
    first = fake_openai.requests[0]
    assert "Answer in Portuguese." in first.body["messages"][0]["content"]
    assert sorted(first.tool_names) == ["get_current_time", "jira_create_issue"]
    # another channel has the bot's own settings
    fake_openai.script("Olá? No: hello.")
    other = run_bot("ask", "--channel", "C2", "hi", env=env, cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    elsewhere = fake_openai.requests[-1]
    assert "Portuguese" not in elsewhere.body["messages"][0]["content"]
    assert "crm_find_contacts" in elsewhere.tool_names


def test_the_channels_write_approval_on_outweighs_write_approval_off(
    env: dict[str, str], fake_openai: FakeOpenAI, jira: FakeJira, tmp_path: Path
) -> None:
    set_channel(env, tmp_path, "write_approval=on")
    script_a_ticket(fake_openai)
    unapproved = {**env, "WRITE_APPROVAL": "off"}

    refused = run_bot("ask", "--channel", "C1", "open a ticket", env=unapproved, cwd=tmp_path)

    assert refused.returncode == 0, refused.stderr
    assert "needs approval" in refused.stdout and "--approve" in refused.stdout
    assert jira.created == [] and not jira.calls("POST", "/issue$")
    messages, (turn,) = stored(env["DATABASE_URL"], "C1")
    (result,) = [m for m in messages if m.role == "tool"]
    assert "needs approval" in json.loads(result.content or "{}")["error"]
    assert turn.tools_called == ["jira_create_issue"]

    script_a_ticket(fake_openai, "create-again")
    approved = run_bot(
        "ask", "--channel", "C1", "--approve", "open a ticket", env=unapproved, cwd=tmp_path
    )
    assert approved.returncode == 0, approved.stderr
    assert jira.created == ["TASK-1"]


def test_the_channels_write_approval_off_outweighs_write_approval_on(
    env: dict[str, str], fake_openai: FakeOpenAI, jira: FakeJira, tmp_path: Path
) -> None:
    set_channel(env, tmp_path, "write_approval=off")
    script_a_ticket(fake_openai)

    result = run_bot(
        "ask", "--channel", "C1", "open a ticket", env={**env, "WRITE_APPROVAL": "on"}, cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Created TASK-1." and jira.created == ["TASK-1"]


@pytest.mark.parametrize(("typed", "created"), [("y\n", ["TASK-1"]), ("n\n", []), ("", [])])
def test_chat_asks_at_the_prompt_where_the_channel_wants_approval(
    env: dict[str, str],
    fake_openai: FakeOpenAI,
    jira: FakeJira,
    tmp_path: Path,
    typed: str,
    created: list[str],
) -> None:
    """WRITE_APPROVAL=off, the channel's on -> the write is asked about; yes runs it, no
    declines it, and an input that ends there (nobody to ask) declines it plainly."""
    set_channel(env, tmp_path, "write_approval=on")
    script_a_ticket(fake_openai)

    result = run_bot(
        "chat",
        "--channel",
        "C1",
        env={**env, "WRITE_APPROVAL": "off"},
        cwd=tmp_path,
        input=f"open a ticket\n{typed}",
    )

    assert result.returncode == 0, result.stderr
    assert "The bot wants to run jira_create_issue with:" in result.stdout
    assert "Allow it? [y/N]" in result.stdout
    assert jira.created == created
    said = result.stdout.split("bot> ", 1)[1]
    if created:
        assert said.startswith("Created TASK-1.")
    elif typed:
        assert said.startswith("Not done: the person declined this action.")
    else:
        assert said.startswith("Not done: this action changes records and needs approval")
        assert "nobody at the terminal" in said


def test_history_show_json_and_the_exports_carry_the_channels_own_settings(
    database_url: str, tmp_path: Path
) -> None:
    seed(database_url)

    def bot(*args: str):  # type: ignore[no-untyped-def]
        return run_bot(*args, env={"DATABASE_URL": database_url}, cwd=tmp_path)

    changed = bot(
        "channels", "set", "C0123", "instructions=Answer in Portuguese.", "tools=jira_*", "--wait=0"
    )
    assert changed.returncode == 0, changed.stderr
    shown = bot("channels", "show", "C0123", "--json")
    document = bot("history", "show", "C0123", "--json")
    lines = bot("history", "export")
    rows = bot("history", "export", "--format", "csv")
    turns = bot("history", "export", "--turns", "--channel", "C0123")

    values = json.loads(shown.stdout)["settings"]
    assert values == {"instructions": "Answer in Portuguese.", "tools": "jira_*"}
    assert json.loads(document.stdout)["channel_settings"] == values
    no_settings = json.loads(bot("history", "show", "D0456", "--json").stdout)
    assert no_settings["channel_settings"] == {}
    exported = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [(m["channel_id"], m["channel_settings"]) for m in exported] == [
        ("C0123", values)
    ] * 5 + [("D0456", {})] * 2
    assert list(exported[0])[-1] == "channel_settings"
    cells = [row["channel_settings"] for row in csv.DictReader(io.StringIO(rows.stdout))]
    assert [json.loads(cell) for cell in cells] == [values] * 5 + [{}] * 2
    assert [json.loads(t)["channel_settings"] for t in turns.stdout.splitlines()] == [values] * 2
