"""``bot tools``: every tool the model would be offered, MCP servers' included."""

from __future__ import annotations

import asyncio
import json

import click

from bot.cli.common import settings_for
from bot.config import Settings
from bot.wiring import build_registry

#: characters of a tool's description shown in the table
DESCRIPTION_WIDTH = 72


@click.command()
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0, 600),
    default=20.0,
    show_default=True,
    help="Seconds to wait for the MCP servers to connect.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per tool instead.")
def tools(wait_s: float, as_json: bool) -> int:
    """List the tools the model is offered: name, source, reads or writes, what it does.
    Connects to the MCP servers of MCP_CONFIG to list theirs; exit status 1 names each
    server that could not be reached."""
    settings = settings_for(log_level="WARNING")
    return asyncio.run(_list(settings, wait_s, as_json))


async def _list(settings: Settings, wait_s: float, as_json: bool) -> int:
    registry = build_registry(settings)
    try:
        unreachable = await registry.ready(wait_s)
        rows = [
            {
                "name": tool.name,
                "source": tool.source,
                "writes": tool.writes,
                "description": tool.description,
            }
            for tool in registry.tools()
        ]
    finally:
        await registry.close()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False))
    else:
        _table(rows)
    for line in unreachable:
        click.echo(f"error: MCP server {line}", err=True)
    return 1 if unreachable else 0


def _table(rows: list[dict[str, object]]) -> None:
    name_width = max((len(str(r["name"])) for r in rows), default=4)
    source_width = max((len(str(r["source"])) for r in rows), default=6)
    click.echo(f"{'tool':<{name_width}}  {'source':<{source_width}}  {'does':<6}  description")
    for row in rows:
        does = "writes" if row["writes"] else "reads"
        click.echo(
            f"{row['name']!s:<{name_width}}  {row['source']!s:<{source_width}}  {does:<6}  "
            f"{_one_line(str(row['description']))}"
        )


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= DESCRIPTION_WIDTH else line[: DESCRIPTION_WIDTH - 1] + "…"
