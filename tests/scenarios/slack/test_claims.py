"""SlackEvents on both databases: one claim per Slack message, leases, release, take-over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from bot.messages import Message, TurnRecord, utcnow
from bot.store.db import create_engine
from bot.store.events import SlackEvents
from bot.store.history import HistoryStore
from bot.store.models import SlackEventRow


@pytest.fixture
async def claims(database_url: str) -> AsyncIterator[SlackEvents]:
    engine = create_engine(database_url)
    yield SlackEvents(engine)
    await engine.dispose()


async def lease_until(claims: SlackEvents, ts: str):  # type: ignore[no-untyped-def]
    async with claims.engine.connect() as connection:
        return await connection.scalar(
            select(SlackEventRow.lease_until).where(SlackEventRow.message_ts == ts)
        )


async def age(claims: SlackEvents, ts: str, by: timedelta) -> None:
    """Move a claim's lease and last touch ``by`` into the past."""
    where = SlackEventRow.message_ts == ts
    async with claims.engine.begin() as connection:
        lease, touched = (
            await connection.execute(
                select(SlackEventRow.lease_until, SlackEventRow.updated_at).where(where)
            )
        ).one()
        await connection.execute(
            update(SlackEventRow)
            .where(where)
            .values(lease_until=lease - by if lease else None, updated_at=touched - by)
        )


async def test_a_message_is_claimed_once_even_by_racing_deliveries(claims: SlackEvents) -> None:
    results = await asyncio.gather(*(claims.claim("C1", "1.1", f"Ev{i}") for i in range(6)))

    assert sorted(results) == [False] * 5 + [True]
    assert await claims.claim("C1", "1.1") is False
    assert await claims.claim("C1", "1.2") is True  # another message
    assert await claims.claim("C2", "1.1") is True  # the same ts in another channel
    assert await claims.status("C1", "1.1") == "received"


async def test_a_renewed_lease_moves_on(claims: SlackEvents) -> None:
    await claims.claim("C1", "1.1")
    await age(claims, "1.1", timedelta(seconds=20))
    before = await lease_until(claims, "1.1")

    await claims.renew({("C1", "1.1")})

    assert await lease_until(claims, "1.1") > before


async def test_done_is_final_and_failed_is_taken_over(claims: SlackEvents) -> None:
    await claims.claim("C1", "1.1")
    await claims.claim("C1", "1.2")
    await asyncio.gather(
        claims.finish("C1", "1.1", done=True), claims.finish("C1", "1.2", done=False)
    )

    assert (await claims.status("C1", "1.1"), await claims.status("C1", "1.2")) == (
        "done",
        "failed",
    )
    assert await claims.claim("C1", "1.1") is False
    assert await claims.claim("C1", "1.2") is True
    assert await claims.claim("C1", "1.2") is False  # taken over: live again


async def test_a_dead_holders_claim_is_taken_over_unless_it_stored_the_message(
    claims: SlackEvents,
) -> None:
    await claims.claim("C1", "1.1")
    await claims.claim("C1", "1.2")
    await age(claims, "1.1", timedelta(minutes=1))
    await age(claims, "1.2", timedelta(minutes=1))
    record = TurnRecord(channel_id="C1", user_id="U1", slack_ts="1.2", model="m", api_mode="chat")
    await HistoryStore(claims.engine).begin_turn(
        record, Message.user("hi", user_id="U1", slack_ts="1.2")
    )

    taken = await asyncio.gather(claims.claim("C1", "1.1"), claims.claim("C1", "1.1"))

    assert sorted(taken) == [False, True]
    assert await claims.claim("C1", "1.2") is False


async def test_old_claims_are_forgotten(claims: SlackEvents) -> None:
    for ts in ("1.1", "1.2", "1.3"):
        await claims.claim("C1", ts)
    await claims.finish("C1", "1.1", done=True)
    await age(claims, "1.1", timedelta(days=2))
    await age(claims, "1.2", timedelta(days=2))  # a dead holder's

    assert await claims.forget_before(utcnow() - timedelta(days=1)) == 2
    assert await claims.status("C1", "1.3") == "received"
