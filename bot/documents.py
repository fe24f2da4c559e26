"""The history documents of docs/interface.md, shared by ``bot history --json``, the export
and the admin API, so every view of a session says the same thing.

Pure: values in, JSON-ready dicts and text lines out; no database, no web, no CLI.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Literal

from bot.messages import Message, SessionSummary, Summary, iso
from bot.turn import TurnState

ExportFormat = Literal["jsonl", "csv"]

EXPORT_FORMATS: tuple[ExportFormat, ...] = ("jsonl", "csv")

CSV_COLUMNS = (
    "channel_id",
    "id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "user_id",
    "slack_ts",
    "turn_id",
    "created_at",
    "edited_at",
)

#: ``history export --turns --format csv``: one row a turn
TURN_CSV_COLUMNS = (
    "channel_id",
    "id",
    "slack_ts",
    "user_id",
    "started_at",
    "outcome",
    "rounds",
    "tools",
    "tokens_in",
    "tokens_out",
    "latency_ms",
    "feedback",
    "model",
    "api_mode",
    "error",
)


def session_list(summaries: Iterable[SessionSummary]) -> list[dict[str, Any]]:
    """``history list --json``: one entry per session; ``name`` only when it is known."""
    documents = []
    for summary in summaries:
        entry: dict[str, Any] = {"channel_id": summary.channel_id}
        if summary.name:
            entry["name"] = summary.name
        entry["messages"] = summary.messages
        entry["turns"] = summary.turns
        entry["last_activity"] = iso(summary.last_activity) if summary.last_activity else None
        entry["feedback"] = {"positive": summary.positive, "negative": summary.negative}
        documents.append(entry)
    return documents


def session_document(
    channel_id: str,
    messages: Sequence[Message],
    turns: Sequence[TurnState],
    channel_settings: Mapping[str, str] | None = None,
    summaries: Sequence[Summary] = (),
) -> dict[str, Any]:
    """``history show --json`` (and the admin API's session): the messages in order, then
    the turns, oldest first, then the channel's own settings as they are now, then the
    summaries of what fell out of its window, oldest first."""
    return {
        "channel_id": channel_id,
        "messages": [message.to_dict() for message in messages],
        "turns": [turn_document(turn) for turn in turns],
        "channel_settings": dict(channel_settings or {}),
        "summaries": [summary_document(summary) for summary in summaries],
    }


def summary_document(summary: Summary) -> dict[str, Any]:
    """One entry of a session's ``summaries``: its text and the messages it covers."""
    return {
        "text": summary.text,
        "first_message_id": summary.first_message_id,
        "last_message_id": summary.last_message_id,
        "created_at": iso(summary.created_at) if summary.created_at else None,
    }


def turn_document(turn: TurnState) -> dict[str, Any]:
    """One entry of a session's ``turns``: its bookkeeping and the feedback on its answer
    (then, when known, why it failed, the model and when it started)."""
    data: dict[str, Any] = {
        "id": turn.id,
        "slack_ts": turn.slack_ts,
        "user_id": turn.user_id,
        "outcome": str(turn.outcome),
        "rounds": turn.rounds,
        "tools": list(turn.tools_called),
        "tokens_in": turn.input_tokens,
        "tokens_out": turn.output_tokens,
        "latency_ms": turn.latency_ms,
        "feedback": [
            {"user_id": given.user_id, "value": given.value, "at": iso(given.at)}
            for given in turn.feedback
        ],
    }
    extra = {
        "error": turn.error,
        "model": turn.model,
        "api_mode": turn.api_mode,
        "started_at": iso(turn.started_at) if turn.started_at else None,
    }
    data.update({key: value for key, value in extra.items() if value is not None})
    return data


def export_object(channel_id: str, message: Message) -> dict[str, Any]:
    """One JSONL export line: the message document with its channel first."""
    return {"channel_id": channel_id, **message.to_dict()}


def csv_row(channel_id: str, message: Message) -> list[str]:
    """One CSV export row in ``CSV_COLUMNS`` order; what does not apply is empty."""
    data = export_object(channel_id, message)
    if "tool_calls" in data:
        data["tool_calls"] = json.dumps(data["tool_calls"], ensure_ascii=False)
    return ["" if data.get(column) is None else str(data[column]) for column in CSV_COLUMNS]


async def export_lines(
    messages: AsyncIterable[tuple[str, Message]], export_format: ExportFormat
) -> AsyncIterator[str]:
    """The export as text lines (each ending in its newline), one message at a time, so
    an export of any size streams instead of being held in memory."""
    if export_format == "jsonl":
        async for channel_id, message in messages:
            yield json.dumps(export_object(channel_id, message), ensure_ascii=False) + "\n"
        return
    yield _csv_line(CSV_COLUMNS)
    async for channel_id, message in messages:
        yield _csv_line(csv_row(channel_id, message))


async def export_turn_lines(
    turns: AsyncIterable[tuple[str, TurnState]], export_format: ExportFormat
) -> AsyncIterator[str]:
    """The turns' export as text lines, streamed: in JSONL each turn's document (as in
    ``history show --json``) with its channel first; in CSV one row a turn, its tools and
    feedback as JSON lists."""
    if export_format == "csv":
        yield _csv_line(TURN_CSV_COLUMNS)
    async for channel_id, turn in turns:
        data = {"channel_id": channel_id, **turn_document(turn)}
        if export_format == "jsonl":
            yield json.dumps(data, ensure_ascii=False) + "\n"
            continue
        for listed in ("tools", "feedback"):
            data[listed] = json.dumps(data[listed], ensure_ascii=False)
        yield _csv_line(["" if data.get(c) is None else str(data[c]) for c in TURN_CSV_COLUMNS])


def pretty_json(text: str | None) -> str:
    """Tool arguments and results for people: JSON indented, anything else as it is."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _csv_line(values: Sequence[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()
