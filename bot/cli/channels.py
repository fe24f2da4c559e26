"""``bot channels list|show|set|unset``: each channel's own settings, as admins set them on
the server. A change applies from the channel's next turn in every running process.

Only the store is built (no model client): a ``tools`` value is checked against the tools
the bot offers (its MCP servers' included, given ``--wait`` to connect), and a pattern that
matches none is a warning, not an error.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from bot.agent.channels import Channels
from bot.channels import BY_CLI, KEYS, BadChannelSetting
from bot.cli.common import prepare_database, settings_for
from bot.config import Settings
from bot.errors import SettingsError
from bot.store.db import create_engines
from bot.tools.base import ToolRegistry
from bot.wiring import build_channels, build_registry

T = TypeVar("T")

#: what a channel ID may be (Slack's, or one ``bot ask`` names)
CHANNEL_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")

_WAIT = click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0, 600),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the MCP servers, when a tools value is checked.",
)


@click.group()
def channels() -> None:
    """Each channel's own settings: instructions, tools, Jira project, approval, answer_all,
    follow_ups."""


@channels.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document.")
def list_channels(as_json: bool) -> None:
    """Every channel with a setting of its own."""
    documents = _with_channels(lambda c: c.documents())
    if as_json:
        click.echo(json.dumps(documents, indent=2, ensure_ascii=False))
        return
    if not documents:
        click.echo("No channel has settings of its own.")
    for document in documents:
        click.echo(document["channel_id"])
        _print_settings(document["settings"])


@channels.command()
@click.argument("channel")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document.")
def show(channel: str, as_json: bool) -> None:
    """One channel's settings and every change of them (who, when)."""
    document = _with_channels(lambda c: c.document(_channel(channel)))
    if as_json:
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    click.echo(document["channel_id"])
    _print_settings(document["settings"])
    if document["changes"]:
        click.echo("changes:")
    for change in document["changes"]:
        value = "(unset)" if change["value"] is None else _one_line(change["value"])
        click.echo(f"  {change['at']}  {change['by']:<5}  {change['key']} = {value}")


@channels.command("set")
@click.argument("channel")
@click.argument("assignments", nargs=-1, required=True, metavar="KEY=VALUE...")
@_WAIT
def set_(channel: str, assignments: tuple[str, ...], wait_s: float) -> None:
    """Set one or more settings of CHANNEL; nothing is applied if one is bad."""
    changes: dict[str, object] = {}
    for assignment in assignments:
        key, equals, value = assignment.partition("=")
        if not equals:
            raise SettingsError(f"{assignment!r} is not KEY=VALUE (keys: {', '.join(KEYS)})")
        changes[key.strip()] = value
    _change(_channel(channel), changes, wait_s if "tools" in changes else None)


@channels.command()
@click.argument("channel")
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
def unset(channel: str, keys: tuple[str, ...]) -> None:
    """Unset settings of CHANNEL: the bot's own settings hold there again."""
    _change(_channel(channel), dict.fromkeys(keys), None)


def _change(channel: str, changes: dict[str, object], wait_s: float | None) -> None:
    async def work(channels: Channels) -> list[str]:
        return (await channels.change(channel, changes, BY_CLI)).warnings

    for warning in _with_channels(work, tools_wait_s=wait_s):
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"{channel}: {', '.join(changes)} {'set' if _sets(changes) else 'unset'}.")


def _sets(changes: dict[str, object]) -> bool:
    return any(value is not None for value in changes.values())


def _with_channels(
    work: Callable[[Channels], Awaitable[T]], *, tools_wait_s: float | None = None
) -> T:
    """Migrate, then run ``work`` against the channels' settings; with ``tools_wait_s``,
    the tools a pattern is checked against are those offered now (MCP servers given that
    long). A bad key or value exits 2, nothing applied."""
    settings = settings_for(log_level="WARNING")
    prepare_database(settings.store)

    async def run() -> T:
        engines = create_engines(settings.store.DATABASE_URL)
        registry = await _registry(settings, tools_wait_s) if tools_wait_s is not None else None
        try:
            return await work(build_channels(settings, engines, registry))
        except BadChannelSetting as exc:
            raise SettingsError(str(exc)) from None
        finally:
            if registry is not None:
                await registry.close()
            await engines.dispose()

    return asyncio.run(run())


async def _registry(settings: Settings, wait_s: float) -> ToolRegistry:
    registry = build_registry(settings)
    await registry.ready(wait_s)
    return registry


def _channel(channel: str) -> str:
    if not CHANNEL_ID.match(channel):
        raise SettingsError(f"{channel[:70]!r} is not a channel ID (e.g. C0123456789)")
    return channel


def _print_settings(settings: dict[str, str]) -> None:
    if not settings:
        click.echo("  (no settings of its own)")
    for key in KEYS:
        if key in settings:
            click.echo(f"  {key} = {_one_line(settings[key])}")


def _one_line(text: str) -> str:
    return " ".join(text.split())
