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
    "channel_settings",
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
    "channel_settings",
)

#: each channel's own settings as they are now, by channel ID (a channel with none: absent)
SettingsByChannel = Mapping[str, Mapping[str, str]]


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


def export_object(
    channel_id: str, message: Message, channel_settings: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One JSONL export line: the message document with its channel first and the channel's
    own settings last (``{}`` when it has none)."""
    return {"channel_id": channel_id, **message.to_dict(), **_settings(channel_settings)}


def csv_row(
    channel_id: str, message: Message, channel_settings: Mapping[str, str] | None = None
) -> list[str]:
    """One CSV export row in ``CSV_COLUMNS`` order; what does not apply is empty."""
    data = export_object(channel_id, message, channel_settings)
    return _csv_cells(data, CSV_COLUMNS, ("tool_calls", "channel_settings"))


async def export_lines(
    messages: AsyncIterable[tuple[str, Message]],
    export_format: ExportFormat,
    channel_settings: SettingsByChannel | None = None,
) -> AsyncIterator[str]:
    """The export as text lines (each ending in its newline), one message at a time, so
    an export of any size streams instead of being held in memory. Each line carries its
    channel's own settings (``channel_settings``, by channel)."""
    settings = channel_settings or {}
    if export_format == "jsonl":
        async for channel_id, message in messages:
            data = export_object(channel_id, message, settings.get(channel_id))
            yield json.dumps(data, ensure_ascii=False) + "\n"
        return
    yield _csv_line(CSV_COLUMNS)
    async for channel_id, message in messages:
        yield _csv_line(csv_row(channel_id, message, settings.get(channel_id)))


async def export_turn_lines(
    turns: AsyncIterable[tuple[str, TurnState]],
    export_format: ExportFormat,
    channel_settings: SettingsByChannel | None = None,
) -> AsyncIterator[str]:
    """The turns' export as text lines, streamed: in JSONL each turn's document (as in
    ``history show --json``) with its channel first and the channel's own settings last; in
    CSV one row a turn, its tools, feedback and channel settings as JSON."""
    settings = channel_settings or {}
    if export_format == "csv":
        yield _csv_line(TURN_CSV_COLUMNS)
    async for channel_id, turn in turns:
        data = {
            "channel_id": channel_id,
            **turn_document(turn),
            **_settings(settings.get(channel_id)),
        }
        if export_format == "jsonl":
            yield json.dumps(data, ensure_ascii=False) + "\n"
            continue
        listed = ("tools", "feedback", "channel_settings")
        yield _csv_line(_csv_cells(data, TURN_CSV_COLUMNS, listed))


def pretty_json(text: str | None) -> str:
    """Tool arguments and results for people: JSON indented, anything else as it is."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _settings(channel_settings: Mapping[str, str] | None) -> dict[str, dict[str, str]]:
    return {"channel_settings": dict(channel_settings or {})}


def _csv_cells(data: dict[str, Any], columns: Sequence[str], listed: Sequence[str]) -> list[str]:
    """``data`` as cells in ``columns`` order: the ``listed`` keys it has as JSON text, a
    missing or null one empty."""
    dumped = {key: json.dumps(data[key], ensure_ascii=False) for key in listed if key in data}
    cells = {**data, **dumped}
    return ["" if cells.get(column) is None else str(cells[column]) for column in columns]


def _csv_line(values: Sequence[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()
