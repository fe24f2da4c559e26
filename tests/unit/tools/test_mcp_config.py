"""MCP_CONFIG: the mcpServers file read into server entries; every mistake one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.errors import SettingsError
from bot.tools.mcp.config import load_servers


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_unset_means_no_servers() -> None:
    assert load_servers(None) == []


def test_stdio_and_http_entries(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "atlassian": {
                    "command": "uvx",
                    "args": ["mcp-atlassian"],
                    "env": {"JIRA_URL": "https://x.atlassian.net"},
                    "allow": ["jira_get_issue"],
                },
                "docs": {
                    "type": "http",
                    "url": "https://example.com/mcp",
                    "headers": {"Authorization": "Bearer t"},
                    "deny": ["delete_page"],
                },
                "off": {"command": "nothing", "disabled": True},
            }
        },
    )
    atlassian, docs = load_servers(path)
    assert (atlassian.name, atlassian.transport, atlassian.command) == ("atlassian", "stdio", "uvx")
    assert atlassian.args == ("mcp-atlassian",)
    assert atlassian.env == {"JIRA_URL": "https://x.atlassian.net"}
    assert atlassian.offers("jira_get_issue") and not atlassian.offers("jira_create_issue")
    assert (docs.transport, docs.url) == ("http", "https://example.com/mcp")
    assert docs.headers == {"Authorization": "Bearer t"}
    assert docs.offers("search") and not docs.offers("delete_page")


BAD = {
    "not JSON": ("{", "is not valid JSON (line 1"),
    "no mcpServers": ({"servers": {}}, 'has no "mcpServers" object'),
    "not an object": ({"mcpServers": {"a": []}}, "server 'a' is not an object"),
    "neither": ({"mcpServers": {"a": {"args": []}}}, 'needs either "command"'),
    "both": ({"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}}, "needs either"),
    "a typo": ({"mcpServers": {"a": {"command": "x", "alow": []}}}, "unknown key 'alow'"),
    "args": ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "'args' must be a list"),
    "env": ({"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}, "'env' must be an object"),
    "headers on stdio": (
        {"mcpServers": {"a": {"command": "x", "headers": {}}}},
        "so 'headers' does not apply",
    ),
    "url": ({"mcpServers": {"a": {"url": "ftp://h/x"}}}, "a url that is not http(s)"),
    "sse": ({"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}, "SSE transport"),
    "twice": ('{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}', "'a' twice"),
    "empty name": ({"mcpServers": {" ": {"command": "x"}}}, "an empty name"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_file_is_one_line_naming_mcp_config(tmp_path: Path, case: str) -> None:
    document, says = BAD[case]
    with pytest.raises(SettingsError) as raised:
        load_servers(write(tmp_path, document))
    message = str(raised.value)
    assert message.startswith("MCP_CONFIG ") and says in message
    assert "\n" not in message


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="MCP_CONFIG cannot be read"):
        load_servers(tmp_path / "nope.json")


def json_blocks(document: str, heading: str) -> list[str]:
    """The ```json blocks of the section of a Markdown file under ``heading``."""
    text = (Path(__file__).parents[3] / document).read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return [part.split("```", 1)[0] for part in section.split("```json\n")[1:]]


def test_the_documented_examples_are_valid(tmp_path: Path) -> None:
    blocks = json_blocks("docs/mcp.md", "## The servers file")
    assert len(blocks) == 2
    atlassian, docs = (load_servers(write(tmp_path, block))[0] for block in blocks)
    assert atlassian.command == "uvx" and atlassian.allow == {"jira_get_issue", "jira_search"}
    assert docs.headers["Authorization"].startswith("Bearer ")


def test_the_readme_example_is_valid(tmp_path: Path) -> None:
    # the MCP_CONFIG error's line sends people to the README's "MCP servers" for the format
    (block,) = json_blocks("README.md", "## MCP servers")
    (docs,) = load_servers(write(tmp_path, block))
    assert docs.url == "https://mcp.example.com/mcp" and docs.allow == {"search_pages"}
