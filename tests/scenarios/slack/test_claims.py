"""SlackEvents on both databases: one claim per Slack message, leases, release, take-over
(by a retry, and by the sweep of another process)."""

from __future__ import annotations

import asyncio
import sqlite3
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


async def test_a_retry_takes_a_dead_holders_claim_over_once_but_leaves_a_kept_reply(
    claims: SlackEvents,
) -> None:
    await claims.claim("C1", "1.1")
    await claims.claim("C1", "1.2")
    await claims.keep_reply("C1", "1.2", {"text": "stored"})
    await age(claims, "1.1", timedelta(minutes=1))
    await age(claims, "1.2", timedelta(minutes=1))
    # its turn had begun: the claim, not the history, says what is left to do
    record = TurnRecord(channel_id="C1", user_id="U1", slack_ts="1.1", model="m", api_mode="chat")
    await HistoryStore(claims.engine).begin_turn(
        record, Message.user("hi", user_id="U1", slack_ts="1.1")
    )

    taken = await asyncio.gather(claims.claim("C1", "1.1"), claims.claim("C1", "1.1"))

    assert sorted(taken) == [False, True]
    assert await claims.claim("C1", "1.2") is False  # a sweep posts the kept reply
    assert await claims.status("C1", "1.2") == "stored"


async def test_a_dead_holders_claims_go_to_one_of_two_racing_sweeps(database_url: str) -> None:
    """Three processes on one database: the first takes two questions on, stores the turn
    of one, and dies; the two others sweep at once -> each claim goes to exactly one of
    them, with its question and, where there is one, the kept reply; the dead holder can
    no longer move the claims on."""
    engines = [create_engine(database_url) for _ in range(3)]
    dead, first, second = (SlackEvents(engine) for engine in engines)
    try:
        assert await dead.claim("C1", "1.1", "Ev1", {"asked": "1.1"})
        assert await dead.claim("C2", "1.2", "Ev2", {"asked": "1.2"})
        assert await dead.keep_reply("C2", "1.2", {"text": "stored"})
        assert await first.take_over_abandoned() == []  # still live
        for ts in ("1.1", "1.2"):
            await age(dead, ts, timedelta(minutes=1))
        assert await dead.take_over_abandoned() == []  # never its own

        taken = await asyncio.gather(first.take_over_abandoned(), second.take_over_abandoned())

        won = taken[0] + taken[1]
        assert len(won) == 2
        assert {claim.question["asked"]: claim.reply for claim in won} == {
            "1.1": None,
            "1.2": {"text": "stored"},
        }
        assert [await dead.status(c, ts) for c, ts in (("C1", "1.1"), ("C2", "1.2"))] == [
            "received",
            "stored",
        ]
        assert await first.take_over_abandoned() == []  # taken: live again
        assert await second.take_over_abandoned() == []
        assert await dead.keep_reply("C1", "1.1", {"text": "late"}) is False
        await dead.finish("C2", "1.2", done=False)
        assert await dead.status("C2", "1.2") == "stored"
    finally:
        for engine in engines:
            await engine.dispose()


async def test_a_sweep_with_nothing_to_take_over_does_not_wait_for_a_write_elsewhere(
    sqlite_url: str,
) -> None:
    """Another process (a CLI import, say) holds the SQLite file's write lock: the sweep,
    every few seconds, finds no claim of a dead holder without waiting for it (it used to
    wait for the lock, up to the busy timeout, to write nothing)."""
    engine = create_engine(sqlite_url)
    claims = SlackEvents(engine)
    await claims.claim("C1", "1.1")  # live: nothing to take over
    other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        async with asyncio.timeout(5):
            assert await claims.take_over_abandoned() == []
        other.execute("COMMIT")
    finally:
        other.close()
        await engine.dispose()


async def test_old_claims_are_forgotten(claims: SlackEvents) -> None:
    for ts in ("1.1", "1.2", "1.3"):
        await claims.claim("C1", ts)
    await claims.finish("C1", "1.1", done=True)
    await age(claims, "1.1", timedelta(days=2))
    await age(claims, "1.2", timedelta(days=2))  # a dead holder's

    assert await claims.forget_before(utcnow() - timedelta(days=1)) == 2
    assert await claims.status("C1", "1.3") == "received"


@pytest.mark.postgres
async def test_a_claim_keeps_its_message_a_place_in_the_channels_queue(
    postgres_url: str,
) -> None:
    """Process A claims 1.1, then process B claims 1.2; B's turn starts first -> it waits
    for A's turn, whose place in line was kept when A claimed it. A claim that ends without
    a turn (failed) gives its place up at once."""
    engines = [create_engine(postgres_url) for _ in range(2)]
    (a, store_a), (b, store_b) = ((SlackEvents(e), HistoryStore(e)) for e in engines)
    order: list[str] = []

    async def turn(store: HistoryStore, ts: str) -> None:
        async with store.channel_lock("C1", ts):
            order.append(ts)
            await asyncio.sleep(0.1)

    try:
        assert await a.claim("C1", "1.1") and await b.claim("C1", "1.2")
        later = asyncio.create_task(turn(store_b, "1.2"))
        await asyncio.sleep(0.5)
        assert order == []  # 1.1 comes first, though its turn has not begun
        await turn(store_a, "1.1")
        await later
        assert order == ["1.1", "1.2"]

        assert await a.claim("C1", "1.3") and await b.claim("C1", "1.4")
        await a.finish("C1", "1.3", done=False)
        async with asyncio.timeout(5):
            await turn(store_b, "1.4")
        assert order[-1] == "1.4"
    finally:
        for engine in engines:
            await engine.dispose()
