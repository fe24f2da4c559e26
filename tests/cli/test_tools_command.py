"""``bot tools`` in a subprocess: every tool the model would be offered, MCP servers'
included (the real fake MCP server over stdio), and exit status 1 naming each server that
cannot be reached."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.helpers import run_bot
from tests.fakes.mcp_fake import Recording, free_port, stdio_entry, write_config


def env_for(tmp_path: Path, servers: dict) -> dict[str, str]:
    return {
        "MCP_CONFIG": str(write_config(tmp_path, servers)),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
    }


def rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by tool name: [source, reads or writes] (columns are two or more
    spaces apart; a source may hold one)."""
    header, *lines = stdout.splitlines()
    assert re.split(r"\s{2,}", header) == ["tool", "source", "does", "description"]
    return {cells[0]: cells[1:3] for cells in (re.split(r"\s{2,}", line) for line in lines)}


def test_every_tool_is_listed_with_its_source(tmp_path: Path) -> None:
    recording = Recording(tmp_path / "calls.jsonl")
    result = run_bot("tools", env=env_for(tmp_path, {"fake": stdio_entry(recording)}), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    listed = rows(result.stdout)
    assert listed["get_current_time"] == ["built in", "reads"]
    assert listed["crm_find_contacts"] == ["CRM", "reads"]
    assert listed["fake__lookup"] == ["fake", "reads"]
    assert listed["fake__create_ticket"] == ["fake", "writes"]
    assert "Look a ticket up by its key." in result.stdout
    assert "jira_get_issue" not in listed  # no JIRA_URL
    assert recording.calls() == []  # listing calls no tool


def test_an_unreachable_server_is_named_and_the_rest_is_listed(tmp_path: Path) -> None:
    recording = Recording(tmp_path / "calls.jsonl")
    servers = {
        "fake": stdio_entry(recording),
        "down": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
        "nothing": {"command": "no-such-command-for-the-bot"},
    }
    result = run_bot("tools", "--json", env=env_for(tmp_path, servers), cwd=tmp_path)

    assert result.returncode == 1
    names = [json.loads(line)["name"] for line in result.stdout.splitlines()]
    assert "fake__lookup" in names and "get_current_time" in names
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: MCP server down: connection refused or host unreachable",
        "error: MCP server nothing: the command 'no-such-command-for-the-bot' is not found on PATH",
    ]


def test_a_malformed_mcp_config_is_a_settings_error(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"a": {"command": "x", "alow": []}}}')
    result = run_bot("tools", env={"MCP_CONFIG": str(config)}, cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: MCP_CONFIG server 'a' has an unknown key 'alow'; the README's \"MCP servers\" "
        "shows the format."
    ]
