"""A channel's window: its newest stored messages within a token budget, read newest first,
and kept in memory between the turns of a process.

Keeping the window spares reading and decoding a few hundred rows every turn (a turn
through the store, histbench at 10,000 stored messages, two runs, each interleaving both
in one process, 2026-12-01: SQLite 4.2 -> 2.2 and 4.2 -> 2.0 ms, PostgreSQL 5.5 -> 4.0 and
5.6 -> 4.0 ms); before it is used, one indexed statement checks that the channel's rows
from the window's oldest on are still exactly the window's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from bot.messages import Message, ToolCall
from bot.store.models import MessageRow

#: rows read per page when filling the window, newest first
PAGE = 500
#: channels whose window a process keeps in memory between turns (least recent dropped)
KEPT = 256
#: greater than any position (a BIGINT)
BEYOND_POSITIONS = 2**63 - 1

_MESSAGES = MessageRow.__table__
#: what a model request needs of a stored message, in the order a page's rows unpack
COLUMNS = ("id", "position", "turn_id", "role", "content", "tool_calls", "tool_call_id")
# Built once: building a statement costs more than running it on SQLite. The one date,
# edited_at, is nearly always NULL: nothing to parse.
_PAGE = (
    select(
        *(_MESSAGES.c[name] for name in COLUMNS),
        _MESSAGES.c.tool_name,
        _MESSAGES.c.tokens,
        _MESSAGES.c.edited_at,
    )
    .where(
        _MESSAGES.c.channel_id == bindparam("channel"), _MESSAGES.c.position < bindparam("before")
    )
    .order_by(_MESSAGES.c.position.desc())
    .limit(PAGE)
)
_SPAN = select(func.count(), func.max(_MESSAGES.c.id), func.max(_MESSAGES.c.edited_at)).where(
    _MESSAGES.c.channel_id == bindparam("channel"), _MESSAGES.c.position >= bindparam("oldest")
)


class Window:
    """A channel's newest messages, oldest first, with their positions: the fewest whose
    tokens exceed ``budget`` (or all the channel has before ``before``)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.positions: list[int] = []
        self.messages: list[Message] = []
        self.tokens = 0
        #: the latest edit of one of its messages, when read
        self.edited: datetime | None = None

    @property
    def newest(self) -> int | None:
        return self.positions[-1] if self.positions else None

    def add(self, position: int, message: Message) -> None:
        """Add the channel's next message, dropping old ones no longer needed."""
        self.positions.append(position)
        self.messages.append(message)
        self.tokens += message.tokens
        while self.messages and self.tokens - self.messages[0].tokens > self.budget:
            self.tokens -= self.messages[0].tokens
            del self.positions[0], self.messages[0]

    def extend(self, after: int | None, stored: Sequence[Message]) -> bool:
        """Add messages stored after position ``after``; False (nothing added) when that
        is not where this window ends, e.g. another process wrote in between."""
        if after != self.newest:
            return False
        for offset, message in enumerate(stored, start=1):
            self.add((after or 0) + offset, windowed(message))
        return True


def read_window(
    connection: Connection, channel_id: str, budget: int, before: int = BEYOND_POSITIONS
) -> Window:
    """The channel's window for ``budget`` from the messages before position ``before``,
    read in pages from the newest end: its cost follows the budget, not the channel."""
    picked: list[Any] = []
    total = 0
    while total <= budget:
        page = connection.execute(_PAGE, {"channel": channel_id, "before": before}).all()
        for row in page:
            picked.append(row)
            total += row[8]  # tokens
            if total > budget:
                break
        if len(page) < PAGE:
            break
        before = page[-1][1]  # position
    window = Window(budget)
    # unpacked by position: attribute access by name costs more per row
    for id_, position, turn_id, role, content, calls, call_id, name, tokens, _ in reversed(picked):
        window.add(
            position,
            Message(
                role=role,
                content=content,
                tool_calls=tuple(ToolCall.from_dict(c) for c in calls) if calls else (),
                tool_call_id=call_id,
                name=name,
                id=id_,
                turn_id=turn_id,
                tokens=tokens,
            ),
        )
    oldest = window.positions[0] if window.positions else 0
    window.edited = max((row[9] for row in picked if row[9] and row[1] >= oldest), default=None)
    return window


def window_of(connection: Connection, channel_id: str, budget: int, kept: Window | None) -> Window:
    """The channel's window: ``kept`` (taken out of Windows), if the channel is unchanged
    since, else read."""
    if kept is not None and kept.budget == budget and _unchanged(connection, channel_id, kept):
        return kept
    return read_window(connection, channel_id, budget)


class Windows:
    """The windows a process keeps, by channel, least recently used first. Each is taken
    out while a transaction uses it and put back after the commit; a deletion anywhere
    drops it (SQLite may reuse the highest id, so a deleted row could look unchanged).
    Used on the event loop's thread only."""

    def __init__(self) -> None:
        self._kept: dict[str, Window] = {}
        #: counts deletions, so a window taken out before one is not put back after it
        self.deletions = 0

    def take_out(self, channel_id: str) -> Window | None:
        """The window kept for the channel, if any, now out of the keeping (see window_of)."""
        return self._kept.pop(channel_id, None)

    def keep(self, channel_id: str, window: Window, deletions: int) -> None:
        """Keep ``window`` for the channel's next turn, unless a deletion ran since it was
        taken out (``deletions``: the count then)."""
        if deletions != self.deletions:
            return
        self._kept[channel_id] = window
        if len(self._kept) > KEPT:
            del self._kept[next(iter(self._kept))]

    def extend(
        self, channel_id: str, after: int | None, stored: Sequence[Message], deletions: int
    ) -> None:
        """After messages were stored after position ``after``: the channel's kept window
        takes them, or is dropped when it does not end there."""
        window = self._kept.pop(channel_id, None)
        if window is not None and window.extend(after, stored):
            self.keep(channel_id, window, deletions)

    def forget(self, channel_id: str | None = None) -> None:
        """Before a deletion: drop the kept window of ``channel_id`` (None: of all)."""
        self.deletions += 1
        if channel_id is None:
            self._kept.clear()
        else:
            self._kept.pop(channel_id, None)


def _unchanged(connection: Connection, channel_id: str, window: Window) -> bool:
    """Whether the channel's rows from the window's oldest on are exactly the window's. A
    row added since has a higher id; a row deleted lowers the count; a row edited since has
    the latest ``edited_at``."""
    oldest = window.positions[0] if window.positions else 0
    count, highest, edited = connection.execute(
        _SPAN, {"channel": channel_id, "oldest": oldest}
    ).one()
    # a window holds stored messages: each has its id
    ids = [message.id for message in window.messages if message.id is not None]
    return bool(
        count == len(window.messages)
        and highest == max(ids, default=None)
        and edited == window.edited
    )


def storable(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL (a model's answer or a tool's text may have one): it
    is dropped, on every backend alike."""
    return text.replace("\x00", "") if text and "\x00" in text else text


def windowed(message: Message) -> Message:
    """``message`` as the window read gives it back: as stored, with what a request needs
    (a later turn's request does not replay this turn's reasoning)."""
    return message.with_(
        content=storable(message.content),
        user_id=None,
        slack_ts=None,
        created_at=None,
        replay=(),
    )
