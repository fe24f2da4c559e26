"""``bot ask`` and ``bot chat``: the agent core in a terminal, stored as Slack turns are. A
turn that waits for approval (WRITE_APPROVAL, or the channel's ``write_approval``) shows its
interruptions here: ``bot chat`` asks at the prompt, ``bot ask`` approves them with
``--approve`` and declines them without; then the turn goes on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import click

from bot.agent.approval import APPROVAL
from bot.agent.conversations import Incoming, Reply
from bot.cli.common import prepare_database, settings_for
from bot.config import Settings
from bot.messages import Decision, ToolCall
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
    return asyncio.run(_ask(settings, incoming, approved if approve else not_approved))


NOT_APPROVED = (
    "Not done: this action changes records and needs approval, which this run did not give "
    "(the person can run `bot ask --approve` to allow it)."
)
NOBODY_TO_ASK = (
    "Not done: this action changes records and needs approval, and nobody at the terminal "
    "could give it."
)
REJECTED = Decision.reject("Not done: the person declined this action.")

#: what the person decides of a call that waits for approval
Decide = Callable[[ToolCall], Awaitable[Decision]]


async def approved(call: ToolCall) -> Decision:
    """``bot ask --approve``: approved in advance."""
    return APPROVAL


async def not_approved(call: ToolCall) -> Decision:
    """``bot ask``: nobody approved it."""
    return Decision.reject(NOT_APPROVED)


async def at_the_prompt(call: ToolCall) -> Decision:
    """``bot chat``: the person at the terminal is asked; with nobody to answer (the input
    ended) it is declined."""
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


async def _ask(settings: Settings, incoming: Incoming, decide: Decide) -> int:
    services = build_services(settings)
    try:
        reply = await _turn(services, incoming, decide)
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
            reply = await _turn(services, Incoming(channel, text), at_the_prompt)
            click.echo(("bot> " if reply.ok else "bot (error)> ") + reply.text)
    finally:
        await services.close()


async def _turn(services: Services, incoming: Incoming, decide: Decide) -> Reply:
    """One turn, with the channel held as a Slack turn would hold it; where it waits for
    approval, ``decide`` decides each interruption and the turn goes on."""
    conversations = services.conversations
    async with services.jobs.hold(incoming.channel_id):
        reply = await conversations.ask(incoming)
        while reply.interruptions and reply.turn_id is not None:
            decisions = {call.id: await decide(call) for call in reply.interruptions}
            went_on = await conversations.resume(reply.turn_id, decisions)
            if went_on is None:  # nobody else can: the channel is held
                break
            reply = went_on
        return reply
