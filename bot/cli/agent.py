"""``bot ask`` and ``bot chat``: the agent core in a terminal, stored as Slack turns are."""

from __future__ import annotations

import asyncio
import json

import click

from bot.agent.conversations import Incoming, Reply
from bot.agent.observer import APPROVAL, TurnObserver
from bot.cli.common import prepare_database, settings_for
from bot.config import Settings
from bot.messages import Decision, ToolCall
from bot.turn import TurnState
from bot.wiring import Services, build_services


@click.command()
@click.option("--channel", required=True, help="The session (channel ID) to use and extend.")
@click.option("--user", "user_id", default=None, help="Record the turn as this Slack user.")
@click.option("--approve", is_flag=True, help="Approve writing tools (ticket creation) in advance.")
@click.argument("text", nargs=-1, required=True)
def ask(channel: str, user_id: str | None, approve: bool, text: tuple[str, ...]) -> int:
    """Run one turn of the agent in CHANNEL's session and print the answer."""
    settings = settings_for(log_level="WARNING")
    settings.require("OPENAI_API_KEY", *settings.crm.required)
    prepare_database(settings.store)
    incoming = Incoming(channel, " ".join(text), user_id=user_id)
    return asyncio.run(_ask(settings, incoming, Decided(settings.slack.WRITE_APPROVAL, approve)))


NOT_APPROVED = (
    "Not done: this action changes records and needs approval, which this run did not give "
    "(the person can run `bot ask --approve` to allow it)."
)


NOBODY_TO_ASK = (
    "Not done: this action changes records and needs approval, and nobody at the terminal "
    "could give it."
)
REJECTED = Decision.reject("Not done: the person declined this action.")


class Decided(TurnObserver):
    """``bot ask``: where a write needs approval (the channel's ``write_approval``, else
    WRITE_APPROVAL), it was given in advance (--approve) or it is declined."""

    def __init__(self, approval: bool, approve: bool) -> None:
        self.approval = approval
        self.approve = approve

    async def decide(self, state: TurnState, call: ToolCall) -> Decision:
        if not state.channel.approval(self.approval) or self.approve:
            return APPROVAL
        return Decision.reject(NOT_APPROVED)


class AtPrompt(TurnObserver):
    """``bot chat``: where a write needs approval (the channel's ``write_approval``, else
    WRITE_APPROVAL), the person at the terminal is asked; with nobody to answer (the input
    ended) it is declined."""

    def __init__(self, approval: bool) -> None:
        self.approval = approval

    async def decide(self, state: TurnState, call: ToolCall) -> Decision:
        if not state.channel.approval(self.approval):
            return APPROVAL
        try:
            arguments = json.dumps(json.loads(call.arguments or "{}"), indent=2, ensure_ascii=False)
        except json.JSONDecodeError:
            arguments = call.arguments
        click.echo(f"The bot wants to run {call.name} with:\n{arguments}")
        try:
            answer = await asyncio.to_thread(input, "Allow it? [y/N] ")
        except EOFError:
            click.echo()
            return Decision.reject(NOBODY_TO_ASK)
        return APPROVAL if answer.strip().lower() in {"y", "yes"} else REJECTED


async def _ask(settings: Settings, incoming: Incoming, observer: TurnObserver) -> int:
    services = build_services(settings)
    try:
        reply = await _turn(services, incoming, observer)
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
    settings = settings_for(log_level="WARNING")
    settings.require("OPENAI_API_KEY", *settings.crm.required)
    prepare_database(settings.store)
    return asyncio.run(_chat(settings, channel))


async def _chat(settings: Settings, channel: str) -> int:
    services = build_services(settings)
    click.echo(f"Talking in session '{channel}'. Ctrl-D or 'exit' to leave.")
    observer = AtPrompt(settings.slack.WRITE_APPROVAL)
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
            reply = await _turn(services, Incoming(channel, text), observer)
            click.echo(("bot> " if reply.ok else "bot (error)> ") + reply.text)
    finally:
        await services.close()


async def _turn(services: Services, incoming: Incoming, observer: TurnObserver) -> Reply:
    """One turn, with the channel held as a Slack turn would hold it."""
    async with services.jobs.hold(incoming.channel_id):
        return await services.conversations.ask(incoming, observer)
