"""A channel's window: its newest stored messages within a token budget, read newest first,
and kept in memory between the turns of a process.

A kept window spares reading and decoding a few hundred rows every turn; before it is used,
one indexed statement checks that the channel's rows from its oldest on are still exactly
its own (``SPAN``).
"""

# speed device: see bench/README.md, "window cache"

from __future__ import annotations

import functools
from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Select, bindparam, func, select, true

from bot.messages import Message, ToolCall
from bot.store.models import MessageRow

T = TypeVar("T")

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
#: what a kept window is checked against: the channel's rows from its oldest on (see span)
SPAN = select(
    func.count().label("count"),
    func.max(_MESSAGES.c.id).label("highest"),
    func.max(_MESSAGES.c.edited_at).label("edited"),
).where(_MESSAGES.c.channel_id == bindparam("channel"), _MESSAGES.c.position >= bindparam("oldest"))


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


def window_of(
    connection: Connection, channel_id: str, budget: int, kept: Window | None, beside: Select[Any]
) -> tuple[Window, Row[Any]]:
    """The channel's window: ``kept`` (taken out of Windows), if the channel is unchanged
    since, else read; and the row ``beside`` reads (its ``channel`` parameter:
    ``channel_id``), in the statement that checks ``kept`` when there is one."""
    params = {"channel": channel_id}
    if kept is None or kept.budget != budget:
        return read_window(connection, channel_id, budget), connection.execute(beside, params).one()
    expected = span(kept)
    params["oldest"] = expected["oldest"]
    found = connection.execute(_checked_beside(beside), params).one()
    seen = found._mapping  # a Row's ``count`` is tuple's method
    if all(seen[key] == expected[key] for key in ("count", "highest", "edited")):
        return kept, found
    return read_window(connection, channel_id, budget), found


@functools.cache
def _checked_beside(beside: Select[Any]) -> Select[Any]:
    """SPAN and ``beside`` in one statement (one row each)."""
    checked, read = SPAN.subquery("span"), beside.subquery("beside")
    return select(checked, read).select_from(checked.join(read, true()))


class Windows:
    """The windows a process keeps, by channel, least recently used first. A window is taken
    out while a turn's write uses it and put back after; a change made from outside a turn
    (``forget``) drops the channel's, and a window taken out before it is not put back
    (SQLite may reuse the highest id, so a deleted row could look unchanged). Used on the
    event loop's thread only."""

    def __init__(self) -> None:
        self._kept: dict[str, Window] = {}
        #: channels whose window was taken out and not forgotten since (oldest first)
        self._out: dict[str, None] = {}

    def take_out(self, channel_id: str) -> Window | None:
        """The window kept for the channel, if any, now out of the keeping (see window_of)."""
        self._out[channel_id] = None
        if len(self._out) > KEPT:  # a write that failed never put its window back
            del self._out[next(iter(self._out))]
        return self._kept.pop(channel_id, None)

    def keep(self, channel_id: str, window: Window) -> None:
        """Keep ``window`` for the channel's next turn, unless the channel was forgotten
        since its window was taken out."""
        if channel_id in self._out:
            del self._out[channel_id]
            self._put(channel_id, window)

    def extend(self, channel_id: str, after: int | None, stored: Sequence[Message]) -> None:
        """After messages were stored after position ``after``: the channel's kept window
        takes them, or is dropped when it does not end there."""
        window = self._kept.pop(channel_id, None)
        if window is not None and window.extend(after, stored):
            self._put(channel_id, window)

    async def changing(self, channel_id: str | None, change: Awaitable[T]) -> T:
        """Await ``change``, made to the messages of ``channel_id`` (None: of any) from
        outside a turn, then forget their windows, whether it succeeded or not."""
        try:
            return await change
        finally:
            self.forget(channel_id)

    def forget(self, channel_id: str | None = None) -> None:
        """After a change made from outside a turn (a deletion, an edit): drop the kept
        window of ``channel_id`` (None: of all), and any taken out."""
        if channel_id is None:
            self._kept.clear()
            self._out.clear()
        else:
            self._kept.pop(channel_id, None)
            self._out.pop(channel_id, None)

    def _put(self, channel_id: str, window: Window) -> None:
        self._kept[channel_id] = window
        if len(self._kept) > KEPT:
            del self._kept[next(iter(self._kept))]


def span(window: Window) -> dict[str, Any]:
    """What SPAN gives for the window's channel while its rows are exactly the window's, and
    SPAN's parameters: a row added since has a higher id, a row deleted lowers the count, a
    row edited since has the latest ``edited_at``."""
    # a window holds stored messages: each has its id
    ids = [message.id for message in window.messages if message.id is not None]
    return {
        "oldest": window.positions[0] if window.positions else 0,
        "count": len(window.messages),
        "highest": max(ids, default=None),
        "edited": window.edited,
    }


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
