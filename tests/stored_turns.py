"""Stored turns for the admin tests (CLI, JSON API, browser): written through TurnStore's
own begin/finish, exactly as the agent writes them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.messages import Message, Outcome, Usage, utcnow
from bot.store.history import HistoryStore
from bot.store.turns import TurnStore
from bot.turn import TurnState
from bot.wiring import Services


async def add_turn(
    store: HistoryStore,
    channel: str,
    text: str,
    replies: Sequence[Message] = (),
    *,
    outcome: str = "answered",
    error: str | None = None,
    at: datetime | None = None,
) -> None:
    """One turn by U1 in ``channel``: ``text``, then ``replies`` (tool calls counted as the
    turn's tools, one round each); 1500 tokens in, 120 out, 2345 ms. ``at`` back-dates it."""
    ts = f"{(at or utcnow()).timestamp():.6f}"
    user = Message.user(text, user_id="U1", slack_ts=ts).with_(created_at=at)
    record = TurnState(
        channel,
        user_id="U1",
        slack_ts=ts,
        started_at=at,
        model="gpt-test",
        api_mode="chat",
        messages=[user],
    )
    turns = TurnStore(store.engines, store.windows)
    await turns.begin(record, budget=0)
    calls = [call.name for reply in replies for call in reply.tool_calls]
    record.rounds, record.tools_called, record.outcome = len(calls), calls, Outcome(outcome)
    record.usage, record.latency_ms = Usage(1500, 120), 2345
    record.error = error
    record.messages += [reply.with_(created_at=at) for reply in replies]
    await turns.finish(record)


def history(services: Services) -> HistoryStore:
    """The stored history of the bot's ``services``, to read what a turn stored."""
    return HistoryStore(services.engines)
