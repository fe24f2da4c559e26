"""``bot tools`` in a subprocess: every tool the model would be offered, MCP servers'
included (the real fake MCP server over stdio), where each server stands, and exit status 1
naming each server that cannot be reached."""

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


def table(lines: list[str], columns: list[str]) -> dict[str, list[str]]:
    """A table's rows by their first cell (columns are two or more spaces apart; a source
    may hold one)."""
    header, *rows = lines
    assert re.split(r"\s{2,}", header) == columns
    return {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", row) for row in rows)}


def rows(stdout: str) -> dict[str, list[str]]:
    """The tools' table by tool name: [source, reads or writes]."""
    tools = stdout.split("\n\n")[0].splitlines()
    listed = table(tools, ["tool", "source", "does", "description"])
    return {name: cells[:2] for name, cells in listed.items()}


def servers(stdout: str) -> dict[str, list[str]]:
    """The MCP servers' table by name: [transport, state]."""
    _, after = stdout.split("\n\n")
    return table(after.splitlines(), ["MCP server", "transport", "state"])


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
    offered = len([name for name in listed if name.startswith("fake__")])
    assert servers(result.stdout) == {"fake": ["stdio", f"connected, {offered} tools"]}
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
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    names = [o["name"] for o in objects if "name" in o]
    assert "fake__lookup" in names and "get_current_time" in names
    offered = len([name for name in names if name.startswith("fake__")])
    assert [o for o in objects if "server" in o] == [
        {
            "server": "fake",
            "transport": "stdio",
            "state": "connected",
            "tools": offered,
            "reason": None,
        },
        {
            "server": "down",
            "transport": "http",
            "state": "failed",
            "tools": 0,
            "reason": "connection refused or host unreachable",
        },
        {
            "server": "nothing",
            "transport": "stdio",
            "state": "failed",
            "tools": 0,
            "reason": "the command 'no-such-command-for-the-bot' is not found on PATH",
        },
    ]
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
