"""Observers of the core's turns for the tests: writes decided by a function, the streamed
text kept."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.agent.observer import TurnObserver
from bot.messages import Decision, ToolCall
from bot.turn import TurnState


class Watching(TurnObserver):
    """Decides each write with ``approver`` (none: it runs); with ``streamed`` the model's
    text is streamed, and kept in ``text``."""

    def __init__(
        self,
        approver: Callable[[ToolCall], Awaitable[Decision]] | None = None,
        *,
        streamed: bool = False,
    ) -> None:
        self.approver = approver
        self.streams_text = streamed
        self.text: list[str] = []

    async def decide(self, state: TurnState, call: ToolCall) -> Decision:
        if self.approver is None:
            return await super().decide(state, call)
        return await self.approver(call)

    async def on_text(self, state: TurnState, delta: str) -> None:
        self.text.append(delta)
