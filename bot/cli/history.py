"""``bot history list|show|export|delete|purge``: review and forget stored sessions.

Only the store is built (no model client), so these work without OPENAI_API_KEY.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO, TypeVar

import click

from bot.agent.sessions import Sessions
from bot.cli.common import prepare_database, settings_for
from bot.documents import EXPORT_FORMATS, ExportFormat, pretty_json, session_list
from bot.errors import BotError
from bot.messages import NEGATIVE, POSITIVE, Message, utcnow
from bot.store.db import create_engines
from bot.store.history import HistoryStore
from bot.turn import TurnState

T = TypeVar("T")

_VERDICTS = {POSITIVE: "👍", NEGATIVE: "👎"}
#: terminal control characters in stored text would let a message rewrite the screen
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@click.group()
def history() -> None:
    """Stored sessions (one per channel): review, export, forget."""


@history.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document.")
def list_sessions(as_json: bool) -> None:
    """Every session: channel, messages, turns, last activity, feedback on its answers."""
    summaries = _with_sessions(lambda sessions: sessions.summaries())
    if as_json:
        _print_json(session_list(summaries))
        return
    if not summaries:
        click.echo("No stored sessions.")
        return
    rows = [
        [
            s.channel_id,
            s.name or "",
            str(s.messages),
            str(s.turns),
            _when(s.last_activity),
            f"👍 {s.positive} 👎 {s.negative}",
        ]
        for s in summaries
    ]
    headers = ["CHANNEL", "NAME", "MESSAGES", "TURNS", "LAST ACTIVITY", "FEEDBACK"]
    click.echo(_table(headers, rows, "llrrlr"))


@history.command()
@click.argument("channel")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document.")
def show(channel: str, as_json: bool) -> None:
    """One session's messages in order, tool calls and results included, then its turns."""

    async def document(sessions: Sessions) -> dict[str, Any]:
        await _require_channel(sessions, channel)
        return await sessions.document(channel)

    async def read(
        sessions: Sessions,
    ) -> tuple[list[Message], list[TurnState], dict[str, str]]:
        await _require_channel(sessions, channel)
        messages, turns = await sessions.read(channel)
        return messages, turns, await sessions.names(messages, turns)

    if as_json:
        _print_json(_with_sessions(document))
        return
    messages, turns, names = _with_sessions(read)
    click.echo(f"Session {_safe(channel)}: {len(messages)} messages, {len(turns)} turns")
    askers = {turn.id: turn.user_id for turn in turns}
    for message in messages:
        click.echo()
        click.echo(_transcript_entry(message, names, askers.get(message.turn_id)))
    if turns:
        click.echo()
        click.echo(_turns_table(turns))


@history.command()
@click.option("--channel", default=None, help="Only this session (default: every session).")
@click.option(
    "--format",
    "export_format",
    type=click.Choice(EXPORT_FORMATS),
    default="jsonl",
    show_default=True,
)
@click.option(
    "--output", type=click.Path(dir_okay=False, writable=True), help="File (default: stdout)."
)
@click.option(
    "--turns",
    is_flag=True,
    help="The turns instead (outcome, rounds, tools, tokens, latency), one per line or row.",
)
def export(
    channel: str | None, export_format: ExportFormat, output: str | None, turns: bool
) -> None:
    """Every stored message, one per line (JSONL) or row (CSV), streamed in batches; with
    --turns every recorded turn."""

    async def write(sessions: Sessions) -> int:
        if channel is not None:
            await _require_channel(sessions, channel)
        lines = 0
        with _open_output(output) as out:
            async for line in sessions.export(channel, export_format, turns=turns):
                out.write(line)
                lines += 1
        return lines - (export_format == "csv")  # the CSV header is not a record

    try:
        count = _with_sessions(write)
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep the exit-time flush quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    if output:
        click.echo(f"Exported {count} {'turns' if turns else 'messages'} to {output}.", err=True)


@history.command()
@click.argument("channel")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def delete(channel: str, yes: bool) -> None:
    """Forget one session: its messages and turns."""

    async def run(sessions: Sessions) -> int:
        await _require_channel(sessions, channel)
        if not yes:
            _, turns = await sessions.read(channel)
            _confirm(f"Delete session {_safe(channel)} and its {len(turns)} turns for good?")
        return await sessions.delete(channel)

    deleted = _with_sessions(run)
    click.echo(f"Deleted session {_safe(channel)} ({deleted} messages).")


@history.command()
@click.option(
    "--older-than",
    "days",
    type=click.IntRange(min=1),
    required=True,
    metavar="DAYS",
    help="Delete messages created more than DAYS days ago.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def purge(days: int, yes: bool) -> None:
    """Retention: delete every message older than DAYS days, in every session."""
    cutoff = utcnow() - timedelta(days=days)

    async def run(sessions: Sessions) -> int:
        if not yes:
            _confirm(f"Delete every message created before {_when(cutoff)}?")
        return await sessions.purge(cutoff)

    deleted = _with_sessions(run)
    click.echo(f"Purged {deleted} messages created before {_when(cutoff)}.")


# -- plumbing -------------------------------------------------------------------------


def _with_sessions(work: Callable[[Sessions], Awaitable[T]]) -> T:
    """Migrate, then run ``work`` against the sessions of a store built for this command."""
    database = settings_for(log_level="WARNING").store
    prepare_database(database, create=False)

    async def run() -> T:
        engines = create_engines(database.DATABASE_URL)
        try:
            return await work(Sessions(HistoryStore(engines)))
        finally:
            await engines.dispose()

    return asyncio.run(run())


async def _require_channel(sessions: Sessions, channel: str) -> None:
    if not await sessions.exists(channel):
        raise BotError(f"no stored session for channel {_safe(channel)!r}")


def _confirm(question: str) -> None:
    # a prompt nobody can answer would hang a script or a cron job
    if not sys.stdin.isatty():
        raise BotError("refusing to delete without confirmation; add --yes to go ahead")
    click.confirm(question, abort=True)


def _open_output(path: str | None) -> contextlib.AbstractContextManager[TextIO]:
    if path is None:
        return contextlib.nullcontext(sys.stdout)
    # newline="": the csv module writes its own line ends
    return open(path, "w", encoding="utf-8", newline="")


def _print_json(document: object) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))


# -- text for people ------------------------------------------------------------------


def _transcript_entry(message: Message, names: dict[str, str], asker: str | None) -> str:
    """One message for people; a write says whose request it was (its turn's asker)."""
    heading = [f"#{message.id}", _when(message.created_at), message.role]
    if message.user_id:
        name = names.get(message.user_id)
        heading.append(f"user {message.user_id}" + (f" ({name})" if name else ""))
    if message.edited_at:
        heading.append(f"edited {_when(message.edited_at)}")
    if message.role == "tool":
        heading.append(f"result of {message.name} ({message.tool_call_id})")
    lines = ["  ".join(_safe(part) for part in heading)]
    if message.content is not None:
        text = pretty_json(message.content) if message.role == "tool" else message.content
        lines.append(_indent(text, 4))
    for call in message.tool_calls:
        whose = ""
        if call.marker and asker:  # a write (only writes carry a marker)
            name = names.get(asker)
            whose = f" for {asker}" + (f" ({name})" if name else "")
        lines.append(f"    calls {_safe(call.name)} ({_safe(call.id)}){_safe(whose)} with")
        if call.preview:
            lines.append(f"      {_safe(call.preview)}")
        lines.append(_indent(pretty_json(call.arguments) or "(no arguments)", 6))
    return "\n".join(lines)


def _turns_table(turns: Sequence[TurnState]) -> str:
    rows = [
        [
            str(turn.id),
            _when(turn.started_at),
            turn.user_id or "",
            turn.outcome,
            str(turn.rounds),
            ", ".join(turn.tools_called),
            f"{turn.input_tokens}/{turn.output_tokens}",
            f"{turn.latency_ms} ms" if turn.latency_ms is not None else "",
            " ".join(f"{_VERDICTS[given.value]} {given.user_id}" for given in turn.feedback),
        ]
        for turn in turns
    ]
    headers = ["TURN", "STARTED", "USER", "OUTCOME", "ROUNDS", "TOOLS", "TOKENS IN/OUT", "LATENCY"]
    return _table([*headers, "FEEDBACK"], rows, "rlllrlrrl")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """Columns padded to their widest cell; ``align`` has one ``l`` or ``r`` per column."""
    cells = [list(headers), *[[_safe(cell) for cell in row] for row in rows]]
    widths = [max(_width(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = []
        for cell, width, side in zip(row, widths, align, strict=True):
            gap = " " * (width - _width(cell))
            padded.append(gap + cell if side == "r" else cell + gap)
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def _width(text: str) -> int:
    """Terminal columns: wide (CJK, most emoji) characters take two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def _when(moment: datetime | None) -> str:
    if moment is None:
        return ""
    if moment.tzinfo is None:  # SQLite hands back naive UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + _safe(line) for line in text.splitlines() or [""])


def _safe(text: str | None) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text or "")
