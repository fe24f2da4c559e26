"""The history window: whole turns within the budget, every call paired with its result."""

from __future__ import annotations

import json

from bot.agent.memory import INTERRUPTED_RESULT, repair, select_window
from bot.messages import Message, ToolCall


def turn(turn_id: int, *, calls: int = 0, tokens: int = 10) -> list[Message]:
    user = Message.user(f"q{turn_id}").with_(turn_id=turn_id, tokens=tokens)
    messages = [user]
    if calls:
        tool_calls = tuple(ToolCall(f"c{turn_id}.{n}", "t", "{}") for n in range(calls))
        messages.append(Message.assistant(None, tool_calls).with_(turn_id=turn_id, tokens=tokens))
        messages += [
            Message.tool_result(c, "{}").with_(turn_id=turn_id, tokens=tokens) for c in tool_calls
        ]
    messages.append(Message.assistant(f"a{turn_id}").with_(turn_id=turn_id, tokens=tokens))
    return messages


def test_newest_whole_turns_that_fit() -> None:
    history = turn(1) + turn(2, calls=2) + turn(3)
    # turn 3 costs 20, turn 2 costs 50, turn 1 costs 20
    assert select_window(history, 69) == turn(3)
    assert select_window(history, 70) == turn(2, calls=2) + turn(3)
    assert select_window(history, 1000) == history
    assert select_window(history, 5) == []


def test_a_turn_that_does_not_fit_stops_the_window() -> None:
    history = turn(1) + turn(2, tokens=100) + turn(3)
    # turn 1 would fit again, but skipping turn 2 would leave a gap in the story
    assert select_window(history, 60) == turn(3)


def test_call_without_result_gets_an_error_result() -> None:
    calls = (ToolCall("a", "t", "{}"), ToolCall("b", "t", "{}"))
    history = [
        Message.user("q"),
        Message.assistant(None, calls),
        Message.tool_result(calls[1], "B"),
        Message.user("next"),
    ]
    repaired = repair(history)
    assert [(m.role, m.tool_call_id) for m in repaired] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("user", None),
    ]
    assert repaired[2].content == INTERRUPTED_RESULT
    assert "interrupted" in json.loads(INTERRUPTED_RESULT)["error"]
    assert repaired[3].content == "B"  # results follow the calls' order


def test_orphan_results_and_duplicates_are_dropped() -> None:
    call = ToolCall("a", "t", "{}")
    history = [
        Message.tool_result(ToolCall("zz", "t", "{}"), "orphan at the start"),
        Message.user("q"),
        Message.assistant(None, (call,)),
        Message.tool_result(call, "first"),
        Message.tool_result(call, "again"),
        Message.assistant("done"),
        Message.tool_result(call, "late orphan"),
    ]
    assert [m.content for m in repair(history)] == ["q", None, "first", "done"]


def test_window_never_starts_with_a_result() -> None:
    history = turn(1, calls=1) + turn(2, calls=3)
    for budget in range(0, 200, 5):
        window = select_window(history, budget)
        assert not window or window[0].role == "user"
        ids = [c.id for m in window for c in m.tool_calls]
        assert ids == [m.tool_call_id for m in window if m.role == "tool"]
