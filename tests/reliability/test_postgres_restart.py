"""PostgreSQL "restarted" under a running bot: every connection to the bot's database is
terminated from a separate admin connection, between turns and during one.

Restarting the shared PostgreSQL server itself would break every other test using it (and
other people's), so the restart is simulated by what it does to the bot: each of its
connections dies, and the pool only finds out when it next uses one. PostgreSQL only.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from bot.agent.conversations import STORE_FAILED, Incoming
from bot.agent.conversations import Reply as Answer
from bot.config import load_settings
from bot.wiring import build_services
from tests.conftest import POSTGRES_URL
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.reliability.helpers import assert_paired, last_user_text, until
from tests.stored_turns import history

pytestmark = pytest.mark.postgres


async def terminate_connections(database_url: str) -> int:
    """What a server restart does to the bot: every backend of its database is ended."""
    assert POSTGRES_URL is not None
    name = database_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(POSTGRES_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        ended = await admin.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
        return sum(1 for row in ended if row[0])
    finally:
        await admin.close()


async def test_connections_dropped_between_and_during_turns(
    postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    """Every connection terminated (a) between two turns, (b) while a turn waits for the
    model -> the same services, not rebuilt, answer the next turns (the pool pre-pings and
    reconnects); the turn in flight is answered or gets the plain "could not reach my
    database" reply, never an exception -> every turn is stored with its outcome, and the
    history stays valid."""
    settings = load_settings(
        DATABASE_URL=postgres_url, OPENAI_API_KEY="test-key", OPENAI_BASE_URL=fake_openai.base_url
    )
    services = build_services(settings)
    fake_openai.responder = lambda request: Reply(text="ok: " + last_user_text(request))

    async def ask(text: str) -> Answer:
        return await services.conversations.ask(Incoming("CR", text, "U1"))

    try:
        assert (await ask("one")).text == "ok: one"
        assert await terminate_connections(postgres_url) >= 1  # the pool's idle connections
        assert (await ask("two")).text == "ok: two"
        assert await history(services).ping()

        fake_openai.latency = 1.0
        in_flight = asyncio.create_task(ask("three"))
        await until(
            lambda: any(last_user_text(r) == "three" for r in list(fake_openai.requests)),
            "the model request of the turn in flight",
        )
        assert await terminate_connections(postgres_url) >= 1
        reply = await in_flight  # raises nothing
        assert reply.text in ("ok: three", STORE_FAILED)
        fake_openai.latency = 0.0

        assert (await ask("four")).text == "ok: four"
        messages = await history(services).messages("CR")
        turns = await history(services).turns("CR")
    finally:
        await services.close()

    assert_paired(messages)
    answered = ["one", "two", "three", "four"] if reply.ok else ["one", "two", "four"]
    assert [m.content for m in messages if m.role == "assistant"] == [
        f"ok: {text}" for text in answered
    ]
    assert [m.content for m in messages if m.role == "user"] == ["one", "two", "three", "four"]
    assert [t.outcome for t in turns] == [
        "answered",
        "answered",
        "answered" if reply.ok else "interrupted",
        "answered",
    ]


async def test_connection_dropped_while_the_channel_is_released(
    postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    """The connection that leaves a channel (deletes its channel_holds row) at the end of
    a turn is terminated mid-statement -> the turn is answered all the same, and the next
    turn in that channel starts at once: leaving is tried again on a new connection
    instead of leaving the channel held until the hold's lease runs out."""
    settings = load_settings(
        DATABASE_URL=postgres_url, OPENAI_API_KEY="test-key", OPENAI_BASE_URL=fake_openai.base_url
    )
    services = build_services(settings)
    fake_openai.responder = lambda request: Reply(text="ok: " + last_user_text(request))

    async def held_turn(incoming: Incoming) -> Answer:
        # as a shell runs a turn: the channel held around it
        async with services.jobs.hold(incoming.channel_id):
            return await services.conversations.ask(incoming)

    # one connection holds the lock, the other watches (pg_stat_activity is a snapshot
    # for the length of a transaction)
    locker = await asyncpg.connect(postgres_url)
    watcher = await asyncpg.connect(postgres_url)
    try:
        fake_openai.latency = 0.5
        in_flight = asyncio.create_task(held_turn(Incoming("CT", "one")))
        await until(lambda: fake_openai.requests, "the model request")
        # the hold's DELETE will wait for this lock; then its backend is ended
        blocker = locker.transaction()
        await blocker.start()
        await locker.execute("LOCK TABLE channel_holds IN SHARE ROW EXCLUSIVE MODE")
        pid = await until(
            lambda: watcher.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE 'DELETE FROM channel_holds%'"
            ),
            "the hold's DELETE waiting for the lock",
        )
        assert await watcher.fetchval("SELECT pg_terminate_backend($1)", pid)
        await blocker.rollback()
        assert (await in_flight).text == "ok: one"
        fake_openai.latency = 0.0

        async with asyncio.timeout(10):  # not the hold's lease
            reply = await held_turn(Incoming("CT", "two"))
        assert reply.text == "ok: two"
    finally:
        await locker.close()
        await watcher.close()
        await services.close()


async def test_connections_dropped_before_a_channel_is_taken(
    postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    """Every connection terminated between two turns that hold their channel -> the second
    takes the channel and is answered: the holds' pool pings nothing, so the statement that
    finds its connection ended runs again on a new one."""
    settings = load_settings(
        DATABASE_URL=postgres_url, OPENAI_API_KEY="test-key", OPENAI_BASE_URL=fake_openai.base_url
    )
    services = build_services(settings)
    fake_openai.responder = lambda request: Reply(text="ok: " + last_user_text(request))

    async def held_turn(text: str) -> Answer:
        async with services.jobs.hold("CH"):
            return await services.conversations.ask(Incoming("CH", text, "U1"))

    try:
        assert (await held_turn("one")).text == "ok: one"
        assert await terminate_connections(postgres_url) >= 2  # the turns' and the holds'
        async with asyncio.timeout(10):
            assert (await held_turn("two")).text == "ok: two"
        turns = await history(services).turns("CH")
    finally:
        await services.close()
    assert [t.outcome for t in turns] == ["answered", "answered"]
