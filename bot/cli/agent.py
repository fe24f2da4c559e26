"""``bot ask`` and ``bot chat``: the agent core in a terminal, stored as Slack turns are."""

from __future__ import annotations

import asyncio
import json

import click

from bot.agent.conversations import Incoming, Reply
from bot.agent.observer import RUN, UNOBSERVED, TurnObserver
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
    settings = settings_for("OPENAI_API_KEY", log_level="WARNING")
    prepare_database(settings.store)
    incoming = Incoming(channel, " ".join(text), user_id=user_id)
    return asyncio.run(_ask(settings, incoming, _decided(settings, approve)))


NOT_APPROVED = (
    "Not done: this action changes records and needs approval, which this run did not give "
    "(the person can run `bot ask --approve` to allow it)."
)


class Decided(TurnObserver):
    """``bot ask``: every write decided in advance."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    async def decide(self, state: TurnState, call: ToolCall) -> Decision:
        return self.decision


class AtPrompt(TurnObserver):
    """``bot chat``: the person at the terminal approves each write."""

    async def decide(self, state: TurnState, call: ToolCall) -> Decision:
        try:
            arguments = json.dumps(json.loads(call.arguments or "{}"), indent=2, ensure_ascii=False)
        except json.JSONDecodeError:
            arguments = call.arguments
        click.echo(f"The bot wants to run {call.name} with:\n{arguments}")
        answer = await asyncio.to_thread(input, "Allow it? [y/N] ")
        if answer.strip().lower() in {"y", "yes"}:
            return RUN
        return Decision("decline", "Not done: the person declined this action.")


def _decided(settings: Settings, approve: bool) -> TurnObserver:
    """Writes approved in advance (--approve), or declined with a reason the model reads."""
    if not settings.slack.WRITE_APPROVAL:
        return UNOBSERVED
    return Decided(RUN if approve else Decision("decline", NOT_APPROVED))


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
    settings = settings_for("OPENAI_API_KEY", log_level="WARNING")
    prepare_database(settings.store)
    return asyncio.run(_chat(settings, channel))


async def _chat(settings: Settings, channel: str) -> int:
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
            observer = AtPrompt() if settings.slack.WRITE_APPROVAL else UNOBSERVED
            reply = await _turn(services, Incoming(channel, text), observer)
            click.echo(("bot> " if reply.ok else "bot (error)> ") + reply.text)
    finally:
        await services.close()


async def _turn(services: Services, incoming: Incoming, observer: TurnObserver) -> Reply:
    """One turn, with the channel held as a Slack turn would hold it."""
    async with services.jobs.hold(incoming.channel_id):
        return await services.conversations.ask(incoming, observer)
