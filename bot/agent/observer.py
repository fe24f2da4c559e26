"""TurnObserver: what a shell is told while a turn runs.

One object, passed as one argument to ``Conversations.ask`` / ``resume`` and on to the loop.
It only observes (the displays, telemetry): which calls wait for a person is the core's
rule (bot.agent.approval), and a turn paused for them says so in its result. Every method
does nothing by default: a shell overrides what it shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.messages import ModelReply, ToolCall
from bot.tools.tool import ToolResult
from bot.turn import TurnState


class TurnObserver:
    """Hooks into one run of a turn; subclass and override what you need."""

    #: the model's text is streamed to ``on_text`` as it is written (else it comes whole)
    streams_text: bool = False

    async def on_model_start(self, state: TurnState) -> None:
        """A model request is about to be sent."""

    async def on_model_end(self, state: TurnState, reply: ModelReply) -> None:
        """The model answered (text, tool calls or both)."""

    async def on_text(self, state: TurnState, delta: str) -> None:
        """A piece of the answer's text, as it is written (only with ``streams_text``)."""

    async def on_tools_start(self, state: TurnState, calls: Sequence[ToolCall]) -> None:
        """A round's calls are about to run (they are stored already)."""

    async def on_tool_end(self, state: TurnState, call: ToolCall, result: ToolResult) -> None:
        """One call ended, failed or not; told as each ends."""

    async def on_end(self, state: TurnState) -> None:
        """The run ended: answered, paused, capped or failed (``state.outcome``)."""


#: the observer of a turn nobody watches
UNOBSERVED = TurnObserver()
