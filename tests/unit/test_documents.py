"""bot.documents: the history list / show / export documents of docs/interface.md."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from bot.documents import (
    CSV_COLUMNS,
    export_lines,
    pretty_json,
    session_document,
    session_list,
)
from bot.messages import Feedback, Message, SessionSummary, ToolCall
from bot.turn import TurnState

AT = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
CALL = ToolCall("call_1", "jira_get_issue", '{"issue_key":"TASK-1"}')


def stored(message: Message, id: int) -> Message:
    return message.with_(id=id, turn_id=7, created_at=AT)


QUESTION = Message.user("what is TASK-1? 🎫 日本語", user_id="U1", slack_ts="1700000000.000100")
MESSAGES = [
    stored(QUESTION, 1),
    stored(Message.assistant(None, (CALL,)), 2),
    stored(Message.tool_result(CALL, '{"key":"TASK-1"}'), 3),
    stored(Message.assistant('TASK-1 is <b>open</b>, "quoted",\nand multi-line'), 4),
]


async def pairs(channel: str, messages: list[Message]) -> AsyncIterator[tuple[str, Message]]:
    for message in messages:
        yield channel, message


async def collect(lines: AsyncIterator[str]) -> str:
    return "".join([line async for line in lines])


def test_session_list_has_the_name_only_when_known() -> None:
    summaries = [
        SessionSummary("C1", "general", 4, 1, AT, positive=2, negative=1),
        SessionSummary("D2", None, 2, 1, datetime(2026, 11, 30, 9, 0)),  # naive = UTC
    ]

    assert session_list(summaries) == [
        {
            "channel_id": "C1",
            "name": "general",
            "messages": 4,
            "turns": 1,
            "last_activity": "2026-11-30T10:00:00Z",
            "feedback": {"positive": 2, "negative": 1},
        },
        {
            "channel_id": "D2",
            "messages": 2,
            "turns": 1,
            "last_activity": "2026-11-30T09:00:00Z",
            "feedback": {"positive": 0, "negative": 0},
        },
    ]


def test_session_document_follows_the_interface_shapes() -> None:
    turn = TurnState("C1", user_id="U1", rounds=1, outcome="answered", id=7, latency_ms=900)
    turn.feedback = [Feedback("U2", "negative", AT)]

    document = session_document("C1", MESSAGES, [turn])

    assert document["channel_id"] == "C1"
    user, calling, result, answer = document["messages"]
    assert user == {
        "id": 1,
        "role": "user",
        "content": "what is TASK-1? 🎫 日本語",
        "user_id": "U1",
        "slack_ts": "1700000000.000100",
        "turn_id": 7,
        "created_at": "2026-11-30T10:00:00Z",
    }
    # the one null: an assistant message that only calls tools
    assert calling["content"] is None
    assert calling["tool_calls"] == [
        {"id": "call_1", "name": "jira_get_issue", "arguments": '{"issue_key":"TASK-1"}'}
    ]
    assert "user_id" not in calling and "tool_call_id" not in calling
    assert result["tool_call_id"] == "call_1" and result["name"] == "jira_get_issue"
    assert "tool_calls" not in result and "tool_calls" not in answer
    assert document["turns"] == [
        {
            "id": 7,
            "slack_ts": None,
            "user_id": "U1",
            "outcome": "answered",
            "rounds": 1,
            "tools": [],
            "tokens_in": 0,
            "tokens_out": 0,
            "latency_ms": 900,
            "feedback": [{"user_id": "U2", "value": "negative", "at": "2026-11-30T10:00:00Z"}],
        }
    ]


async def test_jsonl_export_is_one_message_document_a_line_with_its_channel() -> None:
    settings = {"C1": {"answer_all": "on"}}
    text = await collect(export_lines(pairs("C1", MESSAGES), "jsonl", settings))

    lines = text.splitlines()
    assert len(lines) == len(MESSAGES)
    assert "🎫 日本語" in lines[0]  # kept readable, not \u-escaped
    for line, message in zip(lines, MESSAGES, strict=True):
        assert json.loads(line) == {
            "channel_id": "C1",
            **message.to_dict(),
            "channel_settings": {"answer_all": "on"},
        }
        assert next(iter(json.loads(line))) == "channel_id"


async def test_csv_export_has_the_columns_and_round_trips_awkward_text() -> None:
    text = await collect(export_lines(pairs("C1", MESSAGES), "csv"))

    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [row["role"] for row in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[0]["content"] == "what is TASK-1? 🎫 日本語"
    assert rows[0]["created_at"] == "2026-11-30T10:00:00Z"
    assert rows[1]["content"] == ""  # null content is an empty cell
    assert json.loads(rows[1]["tool_calls"]) == [CALL.to_dict()]
    assert rows[2]["tool_call_id"] == "call_1" and rows[2]["tool_calls"] == ""
    assert rows[3]["content"] == MESSAGES[3].content
    assert {row["turn_id"] for row in rows} == {"7"}
    assert {row["channel_settings"] for row in rows} == {"{}"}  # C1 has none of its own


async def test_csv_export_of_nothing_is_the_header_alone() -> None:
    text = await collect(export_lines(pairs("C1", []), "csv"))

    assert text == ",".join(CSV_COLUMNS) + "\r\n"


def test_pretty_json_indents_json_and_leaves_other_text_alone() -> None:
    assert pretty_json('{"a":[1,"ü"]}') == '{\n  "a": [\n    1,\n    "ü"\n  ]\n}'
    assert pretty_json("not json {") == "not json {"
    assert pretty_json("") == "" and pretty_json(None) == ""
