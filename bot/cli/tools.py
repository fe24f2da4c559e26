"""``bot tools``: every tool the model would be offered, MCP servers' included (``--channel``:
in that channel, as its own settings say), and where each MCP server stands."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import click

from bot.channels import NO_SETTINGS, ChannelSettings
from bot.cli.common import prepare_database, settings_for
from bot.config import Settings
from bot.store.db import create_engines
from bot.tools.base import SourceState
from bot.wiring import build_channels, build_registry

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
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per tool, then per MCP server."
)
@click.option("--channel", help="Only the tools offered in this channel (its own settings).")
def tools(wait_s: float, as_json: bool, channel: str | None) -> int:
    """List the tools the model is offered: name, source, reads or writes, what it does;
    then each MCP server of MCP_CONFIG: connecting, connected (with how many tools) or
    failed (why). Exit status 1 names each server that is not connected."""
    settings = settings_for(log_level="WARNING")
    if channel is not None:
        prepare_database(settings.store)
    return asyncio.run(_list(settings, wait_s, as_json, channel))


async def _list(settings: Settings, wait_s: float, as_json: bool, channel: str | None) -> int:
    registry = build_registry(settings)
    try:
        offered = await _channel_settings(settings, channel)
        unreachable = await registry.ready(wait_s)
        rows = [
            {
                "name": tool.name,
                "source": tool.source,
                "writes": tool.writes,
                "description": tool.description,
            }
            for tool in registry.tools()
            if offered.offers(tool.name)
        ]
        servers = registry.states()
    finally:
        await registry.close()
    if as_json:
        for row in [*rows, *(dataclasses.asdict(server) for server in servers)]:
            click.echo(json.dumps(row, ensure_ascii=False))
    else:
        _table(rows)
        _servers_table(servers)
    for line in unreachable:
        click.echo(f"error: MCP server {line}", err=True)
    return 1 if unreachable else 0


async def _channel_settings(settings: Settings, channel: str | None) -> ChannelSettings:
    """What ``channel`` is offered (None: every tool)."""
    if channel is None:
        return NO_SETTINGS
    engines = create_engines(settings.store.DATABASE_URL)
    try:
        return await build_channels(settings, engines).settings(channel)
    finally:
        await engines.dispose()


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


def _servers_table(servers: list[SourceState]) -> None:
    if not servers:
        return
    width = max(len("MCP server"), *(len(s.server) for s in servers))
    click.echo(f"\n{'MCP server':<{width}}  transport  state")
    for server in servers:
        click.echo(f"{server.server:<{width}}  {server.transport:<9}  {server.describe()}")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= DESCRIPTION_WIDTH else line[: DESCRIPTION_WIDTH - 1] + "…"
