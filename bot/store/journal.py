"""The rows of a turn and the statements that write them (TurnStore's, bot.store.turns),
built once (building a statement costs more than running it on SQLite), on the tables: the
ORM's bulk-statement handling is of no use to them."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, Select, bindparam, insert, select, true, update

from bot.messages import Message, Outcome, utcnow
from bot.store.models import MessageRow, TurnRow
from bot.store.window import SPAN, Window, span, storable
from bot.turn import TurnState

TURNS = TurnRow.__table__
MESSAGES = MessageRow.__table__
MARK_INTERRUPTED = (
    update(TURNS)
    .where(TURNS.c.channel_id == bindparam("channel"), TURNS.c.outcome == Outcome.RUNNING)
    .values(outcome=Outcome.INTERRUPTED, finished_at=bindparam("now"))
)
INSERT_TURN = insert(TURNS).returning(TURNS.c.id)
#: executed with the columns to set, and the turn's id as "turn"
UPDATE_TURN = update(TURNS).where(TURNS.c.id == bindparam("turn"))
NEWEST_POSITION = (
    select(MESSAGES.c.position)
    .where(MESSAGES.c.channel_id == bindparam("channel"))
    .order_by(MESSAGES.c.position.desc())
    .limit(1)
)
# one multi-row INSERT: the ORM's bulk insert would split the rows by which columns are
# None, and asking for the ids in row order would make SQLite insert them one by one; the
# channels and positions tell the ids apart instead
INSERT_MESSAGES = insert(MESSAGES).returning(
    MESSAGES.c.channel_id, MESSAGES.c.position, MESSAGES.c.id
)
#: what a short result costs in a request, about
UNANSWERED_TOKENS = 12


@dataclass
class OpenTurn:
    """A turn being written: its id, its channel, and the position of the channel's newest
    message (where the turn's next one goes after)."""

    id: int
    channel_id: str
    position: int | None


def message_rows(
    turn: OpenTurn, messages: Sequence[Message]
) -> tuple[list[Message], list[dict[str, Any]]]:
    """The messages as stored after the channel's newest (``turn.position``, which moves
    on), and their rows."""
    position = turn.position or 0
    now = utcnow()
    stored = [m.with_(turn_id=turn.id, created_at=m.created_at or now) for m in messages]
    rows = [
        {
            "channel_id": turn.channel_id,
            "position": position + offset,
            "turn_id": turn.id,
            "role": message.role,
            "content": storable(message.content),
            "tool_calls": [c.to_stored() for c in message.tool_calls] or None,
            "tool_call_id": message.tool_call_id,
            "tool_name": message.name,
            "user_id": message.user_id,
            "slack_ts": message.slack_ts,
            "tokens": message.tokens,
            "created_at": message.created_at,
            "context": stored_context(message),
        }
        for offset, message in enumerate(stored, start=1)
    ]
    turn.position = position + len(stored)
    return stored, rows


def stored_context(message: Message) -> dict[str, Any] | None:
    """What a question asked in a thread keeps of it: the thread's messages it showed, and
    the question alone (None for any other message)."""
    if message.context is None:
        return None
    return {"asked": message.asked, **message.context.to_dict()}


def with_ids(stored: list[Message], rows: list[dict[str, Any]], returned: Any) -> list[Message]:
    """``stored`` with the ids the database gave them: ``returned`` rows of channel,
    position and id (INSERT_MESSAGES' RETURNING)."""
    ids = {(channel, position): id_ for channel, position, id_ in returned}
    return [
        m.with_(id=ids[row["channel_id"], row["position"]])
        for m, row in zip(stored, rows, strict=True)
    ]


def find_position(connection: Connection, turn: OpenTurn) -> None:
    """A turn that does not know where its channel ends asks (the channel's newest)."""
    if turn.position is None:
        turn.position = connection.scalar(NEWEST_POSITION, {"channel": turn.channel_id})


def append(connection: Connection, turn: OpenTurn, messages: Sequence[Message]) -> list[Message]:
    """Insert ``messages`` after the channel's newest (``turn.position``, which moves on)."""
    return append_all(connection, [(turn, messages)])[0] if messages else []


def append_all(
    connection: Connection, appends: Sequence[tuple[OpenTurn, Sequence[Message]]]
) -> list[list[Message]]:
    """``append`` for several turns, each of its own channel, in one statement."""
    stored_rows = []
    for turn, messages in appends:
        find_position(connection, turn)
        stored_rows.append(message_rows(turn, messages))
    every_row = [row for _, rows in stored_rows for row in rows]
    returned = connection.execute(INSERT_MESSAGES, every_row).all()
    return [with_ids(stored, rows, returned) for stored, rows in stored_rows]


def close_journal(connection: Connection, channel_id: str, window: Window, unanswered: str) -> None:
    """The channel's newest message calls tools that never got a result (its turn was cut
    short): each gets ``unanswered`` as its result, so the stored history stays paired."""
    last = window.messages[-1] if window.messages else None
    if last is None or not last.tool_calls or last.turn_id is None:
        return
    results = [
        Message.tool_result(call, unanswered).with_(tokens=UNANSWERED_TOKENS)
        for call in last.tool_calls
    ]
    after = window.newest
    stored = append(connection, OpenTurn(last.turn_id, channel_id, after), results)
    window.extend(after, stored)


def new_turn(record: TurnState) -> dict[str, Any]:
    return {
        "channel_id": record.channel_id,
        "user_id": record.user_id,
        "slack_ts": record.slack_ts,
        "outcome": Outcome.RUNNING,
        "tools_called": [],
        "model": record.model,
        "api_mode": record.api_mode,
        "started_at": record.started_at or utcnow(),
    }


def finished(record: TurnState) -> dict[str, Any]:
    return {
        "rounds": record.rounds,
        "tools_called": list(record.tools_called),
        "outcome": record.outcome,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "latency_ms": record.latency_ms,
        "model": record.model,
        "api_mode": record.api_mode,
        "error": record.error,
        "state": record.waiting(),
        "finished_at": utcnow(),
    }


# -- PostgreSQL: a turn's writes, each ONE statement with no transaction around it ----------
# speed device: see bench/README.md, "one-statement turn writes"
# A data-modifying statement can be a CTE of another there (SQLite has no such thing), so
# the turn's row goes in with the person's message (checking the kept window in the same
# statement), and its outcome with its last messages; each statement is atomic by itself.
# A statement's columns are the keys of the rows it is given (message_rows, new_turn,
# finished): it is built once for each set of them.


def insert_begun(
    connection: Connection,
    record: TurnState,
    channel_id: str,
    window: Window,
    user: Message,
    beside: Select[Any],
    *,
    checked: bool,
) -> tuple[OpenTurn, Message, Row[Any]] | None:
    """A running turn and the person's message after ``window``, and the row ``beside``
    reads (its ``channel`` parameter: ``channel_id``), in one statement. ``checked``:
    ``window`` is a kept one, and the statement stores nothing (None) unless the channel's
    rows are still exactly its own (bot.store.window.span); else it was just read."""
    turn = OpenTurn(0, channel_id, window.newest)
    if not checked:
        find_position(connection, turn)
    (stored,), (row,) = message_rows(turn, [user])
    values = new_turn(record)
    params = _prefixed("t_", values) | _prefixed("m_", row) | {"channel": channel_id}
    if checked:
        expected = span(window)
        params["oldest"] = expected.pop("oldest")
        params |= _prefixed("w_", expected)
    statement = _begun_statement(tuple(values), tuple(row), checked, beside)
    inserted = connection.execute(statement, params).first()
    if inserted is None:
        return None
    turn.id = inserted.begun_turn_id
    return turn, stored.with_(id=inserted.begun_message_id, turn_id=turn.id), inserted


def append_finishing(
    connection: Connection, turn: OpenTurn, messages: Sequence[Message], values: dict[str, Any]
) -> list[Message]:
    """Insert ``messages`` and set the turn's ``values`` (``finished``), in one statement."""
    finishing = _prefixed("t_", values) | {"turn": turn.id}
    if not messages:
        connection.execute(_finish_statement(tuple(values)), finishing)
        return []
    stored, rows = message_rows(turn, messages)
    params = [_prefixed("m_", row) | finishing for row in rows]
    statement = _finishing_statement(tuple(values), tuple(rows[0]))
    return with_ids(stored, rows, connection.execute(statement, params).all())


def _bound(prefix: str, names: Sequence[str], table: Any) -> dict[str, Any]:
    # the parameters are prefixed: a turn and a message have columns of the same names
    return {name: bindparam(prefix + name, type_=table.c[name].type) for name in names}


def _prefixed(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    return {prefix + name: value for name, value in values.items()}


@functools.cache
def _begun_statement(
    turn: tuple[str, ...], message: tuple[str, ...], checked: bool, beside: Select[Any]
) -> Any:
    """INSERT of a turn's row (``turn``: its columns) and of its person's message, giving
    back their ids beside the row ``beside`` reads; when ``checked``, only where the
    channel's SPAN is the kept window's (w_ parameters)."""
    values = select(*_bound("t_", turn, TURNS).values())
    if checked:
        seen = SPAN.cte("span")
        values = values.where(
            seen.c.count == bindparam("w_count"),
            seen.c.highest.is_not_distinct_from(bindparam("w_highest", type_=MESSAGES.c.id.type)),
            seen.c.edited.is_not_distinct_from(
                bindparam("w_edited", type_=MESSAGES.c.edited_at.type)
            ),
        )
    begun = insert(TURNS).from_select(list(turn), values).returning(TURNS.c.id).cte("begun")
    columns = _bound("m_", message, MESSAGES) | {"turn_id": begun.c.id}
    stored = (
        insert(MESSAGES)
        .from_select(list(message), select(*(columns[name] for name in message)))
        .returning(MESSAGES.c.id, MESSAGES.c.turn_id)
        .cte("stored")
    )
    read = beside.subquery("beside")
    return select(
        stored.c.id.label("begun_message_id"), stored.c.turn_id.label("begun_turn_id"), read
    ).select_from(stored.join(read, true()))


@functools.cache
def _finish_statement(turn: tuple[str, ...]) -> Any:
    return UPDATE_TURN.values(_bound("t_", turn, TURNS))


@functools.cache
def _finishing_statement(turn: tuple[str, ...], message: tuple[str, ...]) -> Any:
    return (
        insert(MESSAGES)
        .values(_bound("m_", message, MESSAGES))
        .returning(MESSAGES.c.channel_id, MESSAGES.c.position, MESSAGES.c.id)
        .add_cte(_finish_statement(turn).cte("finishing"))
    )
