"""Channel names for the admin pages: stored, and replaced when Slack tells a new one."""

from __future__ import annotations

from bot.messages import Message
from bot.store.db import create_engine
from bot.store.history import HistoryStore
from tests.stored_turns import add_turn


async def test_a_channel_name_is_stored_and_renamed(database_url: str) -> None:
    store = HistoryStore(create_engine(database_url))
    try:
        await add_turn(store, "C1", "hello", [Message.assistant("hi")])
        await store.set_channel_name("C1", "general")
        await store.set_channel_name("C1", "général-2")
        (session,) = await store.list_sessions()
        assert (session.channel_id, session.name) == ("C1", "général-2")
    finally:
        await store.engines.dispose()
