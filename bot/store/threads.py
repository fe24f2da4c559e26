"""ThreadStore: what the bot keeps of the threads it answers in: the thread's messages a
question showed (in the question's row, ``messages.context``) and which of a thread's
messages the history holds already, who it answered in which thread (their replies there
are follow-ups), and people's display names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, bindparam, null, select, type_coerce, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.messages import Message, utcnow
from bot.store.db import Engines, insert_for, store_errors
from bot.store.group_commit import GroupCommit
from bot.store.history import drop_stale, message_from
from bot.store.journal import stored_context
from bot.store.models import MessageRow, PersonRow, ThreadAskerRow
from bot.store.window import Windows, storable

#: the newest questions with a context a look-up reads (older ones are out of any window)
CONTEXTS_READ = 500

_MESSAGES = MessageRow.__table__
_OWN = select(_MESSAGES.c.slack_ts, type_coerce(null(), _MESSAGES.c.context.type).label("context"))
_SHOWN = (
    select(_MESSAGES.c.context)
    .where(_MESSAGES.c.channel_id == bindparam("channel"), _MESSAGES.c.context.is_not(None))
    .order_by(_MESSAGES.c.position.desc())
    .limit(CONTEXTS_READ)
    .subquery("shown")
)
#: which of the Slack messages ``wanted`` the channel's history holds, in one statement:
#: the ts of its own messages among them, and the contexts of its newest questions asked
#: in a thread (each lists the ts of the thread's messages it showed)
HELD = _OWN.where(
    _MESSAGES.c.channel_id == bindparam("channel"),
    _MESSAGES.c.slack_ts.in_(bindparam("wanted", expanding=True)),
).union_all(select(type_coerce(null(), _MESSAGES.c.slack_ts.type), _SHOWN.c.context))


class ThreadStore:
    """Every method is one short transaction and raises StoreError when the database fails."""

    def __init__(self, engines: Engines | AsyncEngine, windows: Windows | None = None) -> None:
        self.engines = Engines.of(engines)
        #: the windows TurnStore keeps: a change made here drops the channel's
        self.windows = windows or Windows()
        self._insert = insert_for(self.engines.dialect)
        self._answered = self._insert(ThreadAskerRow.__table__).on_conflict_do_nothing()
        self._answering = GroupCommit(self._answer_all)

    @store_errors
    async def held(self, channel_id: str, ts: Iterable[str]) -> set[str]:
        """Which of the Slack messages ``ts`` the channel's stored history holds: as a
        message of its own, or in the context of a question (one statement, read as a turn
        begins: see Engines.read)."""
        wanted = set(ts)
        if not wanted:
            return set()
        params = {"channel": channel_id, "wanted": sorted(wanted)}
        rows = await self.engines.read(lambda c: c.execute(HELD, params).all())
        held = {own for own, _ in rows if own is not None}
        for _, context in rows:
            if context is not None:
                held |= {line.get("ts") for line in context.get("lines") or ()} & wanted
        return held

    @store_errors
    async def with_context(self, channel_id: str) -> list[Message]:
        """The channel's newest stored questions that show a thread's messages."""
        async with self.engines.reads.connect() as connection:
            rows = await connection.execute(
                select(MessageRow.__table__)
                .where(MessageRow.channel_id == channel_id, MessageRow.context.is_not(None))
                .order_by(MessageRow.position.desc())
                .limit(CONTEXTS_READ)
            )
            return [message_from(row) for row in rows]

    @store_errors
    async def rewrite(self, channel_id: str, message: Message) -> None:
        """A question's context (or its own text) changed in Slack: its content, context
        and tokens are ``message``'s from now on; the summaries that cover it are dropped."""
        statement = (
            update(MessageRow)
            .where(MessageRow.id == message.id, MessageRow.channel_id == channel_id)
            .values(
                content=storable(message.content),
                context=stored_context(message),
                tokens=message.tokens,
                # other processes' kept windows see the change by it (bot.store.window)
                edited_at=utcnow(),
            )
        )

        def work(connection: Connection) -> None:
            drop_stale(connection, channel_id, [message.id] if message.id is not None else [])
            connection.execute(statement)

        await self.windows.changing(channel_id, self.engines.transaction(work))

    @store_errors
    async def answered(self, channel_id: str, thread_ts: str, user_id: str) -> None:
        """The bot answered ``user_id`` in the thread ``thread_ts``. Those noted while one
        write is under way go in together (group commit: a burst of answers is one INSERT)."""
        # speed device: see bench/README.md, "group commit"
        await self._answering.submit((channel_id, thread_ts, user_id))

    async def _answer_all(self, answered: list[tuple[str, str, str]]) -> list[None]:
        now = utcnow()
        rows = [
            {"channel_id": c, "thread_ts": t, "user_id": u, "created_at": now}
            for c, t, u in dict.fromkeys(answered)
        ]
        await self.engines.statement(lambda c: c.execute(self._answered, rows))
        return [None] * len(answered)

    @store_errors
    async def was_answered(self, channel_id: str, thread_ts: str, user_id: str) -> bool:
        """Whether the bot answered ``user_id`` in the thread ``thread_ts``."""
        async with self.engines.reads.connect() as connection:
            found = await connection.scalar(
                select(ThreadAskerRow.user_id).where(
                    ThreadAskerRow.channel_id == channel_id,
                    ThreadAskerRow.thread_ts == thread_ts,
                    ThreadAskerRow.user_id == user_id,
                )
            )
            return found is not None

    @store_errors
    async def name_people(self, names: Mapping[str, str]) -> None:
        """Display names Slack gave, by user ID."""
        if not names:
            return
        statement = self._insert(PersonRow).values(
            [{"user_id": u, "name": n[:200], "updated_at": utcnow()} for u, n in names.items()]
        )
        renamed: dict[str, Any] = {
            "name": statement.excluded.name,
            "updated_at": statement.excluded.updated_at,
        }
        upsert = statement.on_conflict_do_update(index_elements=["user_id"], set_=renamed)
        await self.engines.statement(lambda c: c.execute(upsert))

    @store_errors
    async def names(self, user_ids: Iterable[str] | None = None) -> dict[str, str]:
        """The display names known, by user ID (of ``user_ids``, or all)."""
        query = select(PersonRow.user_id, PersonRow.name)
        if user_ids is not None:
            query = query.where(PersonRow.user_id.in_(set(user_ids)))
        async with self.engines.reads.connect() as connection:
            return dict((await connection.execute(query)).all())
