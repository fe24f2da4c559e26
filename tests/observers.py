"""Observers of the core's turns for the tests: the streamed text kept."""

from __future__ import annotations

from bot.agent.observer import TurnObserver
from bot.turn import TurnState


class Watching(TurnObserver):
    """With ``streamed`` the model's text is streamed, and kept in ``text``."""

    def __init__(self, *, streamed: bool = False) -> None:
        self.streams_text = streamed
        self.text: list[str] = []

    async def on_text(self, state: TurnState, delta: str) -> None:
        self.text.append(delta)
