"""Which stored messages go into a request: whole turns, newest first, within the budget,
with every tool call paired with its result. Pure: no I/O."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot.messages import Message

INTERRUPTED_RESULT = json.dumps(
    {"error": "No result was recorded for this call (the bot was interrupted)."}
)


def select_window(messages: Sequence[Message], budget: int) -> list[Message]:
    """The newest whole turns of ``messages`` (oldest first) whose tokens fit ``budget``,
    repaired so that the model API accepts them."""
    turns = _split_turns(repair(messages))
    picked: list[list[Message]] = []
    total = 0
    for turn in reversed(turns):
        cost = sum(m.tokens for m in turn)
        if total + cost > budget:
            break
        picked.append(turn)
        total += cost
    return [m for turn in reversed(picked) for m in turn]


def repair(messages: Sequence[Message]) -> list[Message]:
    """Pair every tool call with exactly one result, in call order.

    A call without a result (a crash mid-turn) gets an error result; a result whose call
    is not the message just before it (an orphan, e.g. cut by deletion) is dropped.
    """
    repaired: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.role == "tool":
            continue  # an orphan: its call is not right before it
        repaired.append(message)
        if message.role != "assistant" or not message.tool_calls:
            continue
        results: dict[str, Message] = {}
        while index < len(messages) and messages[index].role == "tool":
            result = messages[index]
            results.setdefault(result.tool_call_id or "", result)
            index += 1
        for call in message.tool_calls:
            found = results.get(call.id)
            if found is None:
                found = Message.tool_result(call, INTERRUPTED_RESULT).with_(
                    turn_id=message.turn_id, tokens=12
                )
            repaired.append(found)
    return repaired


def _split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Consecutive messages of one turn; a turn also starts at each user message, so
    messages stored without a turn still make sensible units."""
    turns: list[list[Message]] = []
    for message in messages:
        starts = not turns or message.role == "user" or message.turn_id != turns[-1][-1].turn_id
        if starts and message.role != "tool":
            turns.append([message])
        else:
            turns[-1].append(message)
    return turns
