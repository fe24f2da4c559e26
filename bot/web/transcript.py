"""A session's transcript as the admin page shows it: grouped by turn, each tool result
placed under the call that asked for it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.messages import NEGATIVE, Message, Outcome, ToolCall
from bot.turn import TurnState

#: turns the "problems" filter shows: they failed or hit the round cap
PROBLEM_OUTCOMES = frozenset(
    {Outcome.ERROR, Outcome.INTERRUPTED, Outcome.TRUNCATED, Outcome.MAX_ROUNDS}
)


def disliked(turn: TurnState) -> bool:
    """Someone gave the turn's answer a thumbs-down (the filter of such turns shows it)."""
    return any(given.value == NEGATIVE for given in turn.feedback)


@dataclass
class ToolUse:
    call: ToolCall
    result: Message | None = None
    #: a write's: the user whose request it was (its turn's asker)
    for_user: str | None = None

    @property
    def failed(self) -> bool:
        try:
            data = json.loads(self.result.content or "") if self.result else None
        except ValueError:
            return False
        return isinstance(data, dict) and "error" in data


@dataclass
class Entry:
    message: Message
    tool_uses: list[ToolUse]


@dataclass
class Section:
    turn_id: int | None
    turn: TurnState | None
    entries: list[Entry] = field(default_factory=list)

    @property
    def is_problem(self) -> bool:
        return self.turn is not None and self.turn.outcome in PROBLEM_OUTCOMES


def transcript(messages: Sequence[Message], turns: Sequence[TurnState]) -> list[Section]:
    """Messages in order, grouped by turn; each tool result is placed under its call."""
    by_id = {turn.id: turn for turn in turns}
    sections: list[Section] = []
    waiting: dict[str, ToolUse] = {}
    for message in messages:
        use = waiting.pop(message.tool_call_id or "", None) if message.role == "tool" else None
        if use is not None:
            use.result = message
            continue
        if not sections or sections[-1].turn_id != message.turn_id:
            sections.append(Section(message.turn_id, by_id.get(message.turn_id)))
        turn = sections[-1].turn
        asker = turn.user_id if turn is not None else None
        # a call with a marker is a write (bot.agent.loop gives writes theirs)
        uses = [ToolUse(c, for_user=asker if c.marker else None) for c in message.tool_calls]
        waiting.update((use.call.id, use) for use in uses)
        sections[-1].entries.append(Entry(message, uses))
    shown = {section.turn_id for section in sections}
    sections += [Section(turn.id, turn) for turn in turns if turn.id not in shown]
    return sections
