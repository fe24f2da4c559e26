"""The journal's group commit: journals that come together go in one statement, and one
that cannot be stored fails alone."""

from __future__ import annotations

import asyncio

from bot.errors import StoreError
from bot.messages import Message, ToolCall
from bot.store.db import create_engines
from bot.store.history import HistoryStore
from bot.store.turns import TurnStore
from bot.turn import TurnState


def asking(call_id: str) -> Message:
    return Message.assistant(None, (ToolCall(call_id, "get_current_time", "{}"),)).with_(tokens=9)


async def test_journals_together_store_each_and_fail_only_the_one_at_fault(
    database_url: str,
) -> None:
    """Three turns of three channels journal at once -> each turn's round is stored after
    its question, with its own ids; a turn whose position another writer took meanwhile
    (its channel written behind its back) gets a StoreError, the other two are stored."""
    engines = create_engines(database_url)
    turns, elsewhere = TurnStore(engines), TurnStore(engines)
    try:
        begun = {}
        for channel in ("CA", "CB", "CC"):
            question = Message.user(f"question in {channel}").with_(tokens=5)
            begun[channel] = TurnState(channel_id=channel, user_id="U1", messages=[question])
            await turns.begin(begun[channel], 12_000)
        # CB's next position is taken by a turn this store does not know of
        other = TurnState(channel_id="CB", messages=[Message.user("meanwhile").with_(tokens=5)])
        await elsewhere.begin(other, 12_000)
        assert other.messages[0].id is not None

        for channel, state in begun.items():
            state.messages.append(asking(f"call_{channel}"))
        outcomes = await asyncio.gather(
            *(turns.save(state) for state in begun.values()), return_exceptions=True
        )
        history = HistoryStore(engines)
        stored = {c: await history.messages(c) for c in begun}
    finally:
        await engines.dispose()

    ok_a, failed_b, ok_c = outcomes
    assert isinstance(failed_b, StoreError)
    for channel, journaled in (("CA", ok_a), ("CC", ok_c)):
        assert journaled is None
        assert begun[channel].saved == 2
        message = begun[channel].messages[1]
        assert [m.content or m.tool_calls[0].id for m in stored[channel]] == [
            f"question in {channel}",
            f"call_{channel}",
        ]
        assert message.id == stored[channel][1].id
        assert message.turn_id == begun[channel].id
    assert [m.content for m in stored["CB"]] == ["question in CB", "meanwhile"]
