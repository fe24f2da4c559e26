"""``bot ask`` and ``bot chat``: the agent core in a terminal, stored as Slack turns are."""

from __future__ import annotations

import asyncio

import click

from bot.agent.service import Incoming
from bot.cli.common import prepare_database, settings_for
from bot.wiring import build_services


@click.command()
@click.option("--channel", required=True, help="The session (channel ID) to use and extend.")
@click.option("--user", "user_id", default=None, help="Record the turn as this Slack user.")
@click.argument("text", nargs=-1, required=True)
def ask(channel: str, user_id: str | None, text: tuple[str, ...]) -> int:
    """Run one turn of the agent in CHANNEL's session and print the answer."""
    settings = settings_for("OPENAI_API_KEY", log_level="WARNING")
    prepare_database(settings)
    return asyncio.run(_ask(settings, Incoming(channel, " ".join(text), user_id=user_id)))


async def _ask(settings, incoming: Incoming) -> int:  # type: ignore[no-untyped-def]
    services = build_services(settings)
    try:
        reply = await services.conversations.handle(incoming)
    finally:
        await services.close()
    if reply.ok:
        click.echo(reply.text)
        return 0
    click.echo(f"error: {reply.text}", err=True)
    return 1


@click.command()
@click.option("--channel", default="local", show_default=True, help="The session to use.")
def chat(channel: str) -> int:
    """A terminal conversation with the agent (Ctrl-D or 'exit' to leave)."""
    settings = settings_for("OPENAI_API_KEY", log_level="WARNING")
    prepare_database(settings)
    return asyncio.run(_chat(settings, channel))


async def _chat(settings, channel: str) -> int:  # type: ignore[no-untyped-def]
    services = build_services(settings)
    click.echo(f"Talking in session '{channel}'. Ctrl-D or 'exit' to leave.")
    try:
        while True:
            try:
                text = await asyncio.to_thread(input, "you> ")
            except EOFError:
                click.echo()
                return 0
            if text.strip() in {"exit", "quit"}:
                return 0
            if not text.strip():
                continue
            reply = await services.conversations.handle(Incoming(channel, text))
            click.echo(("bot> " if reply.ok else "bot (error)> ") + reply.text)
    finally:
        await services.close()
