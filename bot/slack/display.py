"""Display: what shows a running turn in its thread, from its first step to its reply.

Two kinds: the answer's stream (bot.slack.stream.AnswerStream), where Slack takes one, and
a live message of the steps (bot.slack.live.LiveStatus). Delivery runs every turn the same
way through one: ``start``, the steps and text as they come, ``end`` (nothing more goes
out), the reply posted, ``tidy``, and ``close`` whatever happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from bot.messages import ToolCall


class Shown(NamedTuple):
    """What a display holds of the answer when it ends: the message the answer is to be
    posted into (None: a new one), and how many of its characters are shown already."""

    into: str | None = None
    held: int = 0


class Display(Protocol):
    #: whether it shows the answer's text as it is written
    streams_text: bool

    async def start(self) -> None:
        """The turn is about to run."""

    async def steps(self, calls: Sequence[ToolCall]) -> None:
        """A round's calls are about to run."""

    async def text(self, piece: str) -> None:
        """The model wrote ``piece`` of the answer."""

    async def done(self, call: ToolCall, failed: bool) -> None:
        """A call ended."""

    async def end(
        self,
        answer: str | None,
        *,
        post_id: str | None,
        blocks: list[dict[str, Any]] | None,
        resumed: bool,
    ) -> Shown:
        """Nothing more goes out: ``answer`` (None: the turn has none to show) is shown as
        far as the display can; ``resumed``: the turn was taken over."""
        ...

    async def tidy(self, answered: bool) -> None:
        """After the reply is up: what only showed the turn running goes."""

    async def close(self) -> None:
        """Last, whatever happened."""
