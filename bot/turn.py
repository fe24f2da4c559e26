"""TurnState: one turn of a channel's session as one value.

It holds what the turn was asked, what it has done so far (its messages, rounds, tools and
tokens), the calls that wait and what was decided of them, and where it stands (its
outcome). The store loads and saves it (bot.store.turns: its row and its journal), the loop
runs it (bot.agent.loop), and the shells read it. A turn that goes on, whether a person let
it or its process died, goes on from a loaded state, the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.channels import NO_SETTINGS, ChannelSettings
from bot.errors import ModelError
from bot.messages import (
    Decision,
    Feedback,
    Message,
    Outcome,
    Summary,
    Usage,
    iso,
    parse_iso,
)


@dataclass(slots=True)
class TurnState:
    """One turn: its row's fields, its messages so far, and the calls that wait."""

    channel_id: str
    user_id: str | None = None
    slack_ts: str | None = None
    id: int | None = None
    model: str | None = None
    api_mode: str | None = None
    started_at: datetime | None = None
    outcome: Outcome = Outcome.RUNNING
    #: why it failed, as "kind: message" (the message is what the person was told)
    error: str | None = None
    latency_ms: int | None = None
    rounds: int = 0
    #: rounds done before the round cap's count started (a turn continued past the cap)
    round_base: int = 0
    tools_called: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: the turn's own messages, its question first; the first ``saved`` are stored
    messages: list[Message] = field(default_factory=list)
    saved: int = 0
    #: the channel's stored history before the turn, as the model is shown it (never saved)
    history: list[Message] = field(default_factory=list)
    #: an assistant message whose calls have no results yet: waiting for a person's
    #: ``decisions`` (by call id), or left unfinished by a crash (``recovering``)
    pending: Message | None = None
    decisions: dict[str, Decision] = field(default_factory=dict)
    #: the pending calls may have been sent before a crash: a write is looked up, never resent
    recovering: bool = False
    paused_at: datetime | None = None
    #: where the shell shows the turn's buttons (opaque here)
    card: dict[str, str] | None = None
    #: the final answer of this run of the turn, once there is one
    answer: str | None = None
    #: what people said of its answer (read for review)
    feedback: list[Feedback] = field(default_factory=list)
    #: its channel's own settings, as read when the turn began or was loaded (never saved)
    channel: ChannelSettings = field(default=NO_SETTINGS, repr=False)
    #: its channel's newest summary of what left the window, read with it (never saved)
    summary: Summary | None = field(default=None, repr=False)
    #: it runs for someone of another workspace (a shared channel): no write runs for them
    #: (set by each run's caller, never saved)
    external: bool = field(default=False, repr=False)
    #: the store's: the position of the channel's newest stored message
    position: int | None = field(default=None, repr=False)

    @property
    def input_tokens(self) -> int:
        return self.usage.input_tokens

    @property
    def output_tokens(self) -> int:
        return self.usage.output_tokens

    @property
    def error_message(self) -> str:
        """What the person was told when the turn failed."""
        return (self.error or "").partition(": ")[2]

    @property
    def unsaved(self) -> list[Message]:
        """The turn's messages not stored yet."""
        return self.messages[self.saved :]

    def fail(self, error: ModelError) -> None:
        """The turn ends without an answer, for ``error`` (its message is the reply)."""
        self.outcome, self.error = Outcome.ERROR, f"{error.kind}: {error}"

    def waiting(self) -> dict[str, Any] | None:
        """What a stopped turn keeps beside its messages, as stored (None: nothing)."""
        data: dict[str, Any] = {}
        if self.pending is not None:
            pending = self.pending.to_dict()
            pending["tool_calls"] = [c.to_stored() for c in self.pending.tool_calls]
            data["pending"] = pending
        if self.decisions:
            data["decisions"] = {k: d.to_dict() for k, d in self.decisions.items()}
        if self.paused_at is not None:
            data["paused_at"] = iso(self.paused_at)
        if self.card is not None:
            data["card"] = dict(self.card)
        return data or None

    def restore_waiting(self, data: dict[str, Any] | None) -> None:
        """Take back what ``waiting`` stored."""
        data = data or {}
        paused_at = data.get("paused_at")
        self.pending = Message.from_dict(data["pending"]) if data.get("pending") else None
        self.decisions = {
            k: Decision.from_dict(d) for k, d in (data.get("decisions") or {}).items()
        }
        self.paused_at = parse_iso(paused_at) if paused_at else None
        self.card = data.get("card")

    def withdraw(self) -> None:
        """Keep nothing the model made of the question: only where its card is."""
        self.pending, self.decisions, self.paused_at = None, {}, None


#: the channel of the turn whose tools run (a tool reading "this channel" takes it from here,
#: never from the model's arguments)
_TURN_CHANNEL: ContextVar[str | None] = ContextVar("turn_channel", default=None)
#: who asked the turn whose tools run (a write says whose request it was)
_TURN_ASKER: ContextVar[str | None] = ContextVar("turn_asker", default=None)


@contextlib.contextmanager
def turn_channel(channel_id: str, asker: str | None = None) -> Iterator[None]:
    """Tools called within are called for a turn of ``channel_id``, asked by ``asker`` (a
    user id; None: nobody known, as in ``bot ask`` without ``--user``)."""
    tokens = _TURN_CHANNEL.set(channel_id), _TURN_ASKER.set(asker)
    try:
        yield
    finally:
        _TURN_CHANNEL.reset(tokens[0])
        _TURN_ASKER.reset(tokens[1])


def current_channel() -> str | None:
    """The channel of the turn a tool is called for (None: outside a turn)."""
    return _TURN_CHANNEL.get()


def current_asker() -> str | None:
    """The user id of who asked the turn a tool is called for (None: nobody known)."""
    return _TURN_ASKER.get()
