"""SQLite as the bot sets it up (plain aiosqlite, WAL, busy_timeout, BEGIN IMMEDIATE): what
SQLAlchemy reads of a statement is all there; the process's transactions take turns, and
so do those of another engine on the file; a reader neither waits for a writer nor holds
one up; a database locked by another process is waited for while the loop goes on; the
write-ahead log stays short."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError

from bot.store.db import create_engine, create_engines
from bot.store.history import HistoryStore


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'driver.db'}")
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE)"))
    yield engine
    await engine.dispose()


@contextlib.asynccontextmanager
async def written_elsewhere(
    path: Path, value: int, log: list[str] | None = None
) -> AsyncIterator[threading.Event]:
    """Another process's write (here: a plain sqlite3 connection on a thread): it inserts
    ``value`` into ``t`` and holds the write lock until the yielded event is set (or the
    block ends), then commits."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO t VALUES (?)", (value,))
        locked.set()
        release.wait(10)
        if log is not None:
            log.append("elsewhere commits")
        other.execute("COMMIT")
        other.close()

    holder = asyncio.create_task(asyncio.to_thread(hold))
    try:
        assert await asyncio.to_thread(locked.wait, 10)
        yield release
    finally:
        release.set()
        await holder


async def test_rows_counts_and_returning(engine) -> None:  # type: ignore[no-untyped-def]
    async with engine.begin() as connection:
        many = await connection.execute(
            text("INSERT INTO t (name) VALUES (:name)"), [{"name": "a"}, {"name": "b"}]
        )
        assert many.rowcount == 2
        inserted = await connection.execute(
            text("INSERT INTO t (name) VALUES ('c') RETURNING id, name")
        )
        assert inserted.all() == [(3, "c")]
        updated = await connection.execute(text("UPDATE t SET name = name || '!' WHERE id > 1"))
        assert updated.rowcount == 2
        rows = await connection.execute(text("SELECT name FROM t ORDER BY id"))
        assert rows.scalars().all() == ["a", "b!", "c!"]
        empty = await connection.execute(text("SELECT name FROM t WHERE id > 9"))
        assert empty.first() is None


async def test_a_failed_statement_raises_and_rolls_back(engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IntegrityError):
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO t (name) VALUES ('x')"))
            await connection.execute(text("INSERT INTO t (name) VALUES ('x')"))
    with pytest.raises(OperationalError, match="no such table"):
        async with engine.connect() as connection:
            await connection.execute(text("SELECT * FROM missing"))
    async with engine.connect() as connection:
        assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar() == 0


async def test_transactions_of_many_tasks_and_engines_take_turns(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a second engine on the file, as another store or a CLI command has
    other = create_engine(f"sqlite:///{tmp_path / 'driver.db'}")
    engines = [engine, other, engine]

    async def insert(n: int) -> None:
        async with engines[n % 3].begin() as connection:
            count = (await connection.execute(text("SELECT count(*) FROM t"))).scalar()
            await connection.execute(text("INSERT INTO t (name) VALUES (:n)"), {"n": str(n)})
            await connection.execute(text("INSERT INTO t (name) VALUES (:n)"), {"n": f"{n}+"})
            after = (await connection.execute(text("SELECT count(*) FROM t"))).scalar()
            assert after == count + 2  # no one else's rows came in between

    try:
        await asyncio.gather(*(insert(n) for n in range(60)))
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar() == 120
    finally:
        await other.dispose()


async def test_a_writer_waits_for_another_connections_transaction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'driver.db'}"
    first, second = create_engine(url), create_engine(url)
    try:
        async with first.begin() as connection:
            await connection.execute(text("CREATE TABLE t (n INTEGER)"))
        order = []

        async def hold() -> None:
            async with first.begin() as connection:
                await connection.execute(text("INSERT INTO t VALUES (1)"))
                await asyncio.sleep(0.3)
                order.append("first commits")

        async def write() -> None:
            await asyncio.sleep(0.1)
            async with second.begin() as connection:  # BEGIN IMMEDIATE waits for the lock
                count = (await connection.execute(text("SELECT count(*) FROM t"))).scalar()
                await connection.execute(text("INSERT INTO t VALUES (:n)"), {"n": count + 1})
            order.append("second commits")

        await asyncio.gather(hold(), write())
        async with second.connect() as connection:
            rows = (await connection.execute(text("SELECT n FROM t ORDER BY n"))).scalars()
            assert rows.all() == [1, 2]
        assert order == ["first commits", "second commits"]
        async with first.begin():  # a transaction without a statement
            pass
    finally:
        await first.dispose()
        await second.dispose()


async def test_a_reader_neither_waits_for_a_writer_nor_holds_one_up(tmp_path: Path) -> None:
    """A health check or an admin page's read while a turn's write is under way, and a
    write while a read is under way: neither waits for the other."""
    engines = create_engines(f"sqlite:///{tmp_path / 'driver.db'}")
    engine, reads = engines.writes, engines.reads
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (n INTEGER)"))
            await connection.execute(text("INSERT INTO t VALUES (1)"))
        writing, written = asyncio.Event(), asyncio.Event()

        async def write() -> None:
            async with engine.begin() as connection:
                await connection.execute(text("INSERT INTO t VALUES (2)"))
                writing.set()
                await written.wait()  # the write lock held, as by a long write

        async def read() -> list[int]:
            assert await HistoryStore(engines).ping()
            async with reads.connect() as connection:
                return list((await connection.execute(text("SELECT n FROM t"))).scalars())

        writer = asyncio.create_task(write())
        await writing.wait()
        reader = asyncio.create_task(read())
        done, _ = await asyncio.wait({reader}, timeout=10)
        assert reader in done, "the read waited for the write under way"
        assert reader.result() == [1]  # what was committed before it began
        written.set()
        await writer

        writing.clear()
        written.clear()
        async with reads.connect() as reading:
            await reading.execute(text("SELECT count(*) FROM t"))  # its transaction is open
            writer = asyncio.create_task(write())
            wrote = asyncio.create_task(writing.wait())
            done, _ = await asyncio.wait({wrote}, timeout=10)
            assert wrote in done, "the write waited for the read under way"
            written.set()
            await writer
            # the read goes on with what there was when it began
            assert (await reading.execute(text("SELECT count(*) FROM t"))).scalar() == 2
        async with reads.connect() as connection:
            assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar() == 3

        # another process's write, as a `bot crm import` or a purge would hold it: the
        # health check does not wait for it
        async with written_elsewhere(tmp_path / "driver.db", 4) as unlock:
            reader = asyncio.create_task(read())
            done, _ = await asyncio.wait({reader}, timeout=10)
            assert reader in done, "the read waited for another process's write"
            assert unlock.is_set() is False and sorted(reader.result()) == [1, 2, 2]
    finally:
        await engines.dispose()


async def test_a_database_locked_elsewhere_is_waited_for_off_the_loop(tmp_path: Path) -> None:
    """Another process holds the write lock for 0.3 s: a turn's transaction waits for it,
    and the event loop goes on meanwhile."""
    path = tmp_path / "driver.db"
    engine = create_engine(f"sqlite:///{path}")
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (n INTEGER)"))
        order: list[str] = []
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async with written_elsewhere(path, 1, order) as release:
            threading.Timer(0.3, release.set).start()
            ticker = asyncio.create_task(tick())
            async with engine.begin() as connection:
                await connection.execute(text("INSERT INTO t VALUES (2)"))
            order.append("the turn commits")
            ticker.cancel()
        assert order == ["elsewhere commits", "the turn commits"]
        assert ticks >= 10  # ~25 in 0.3 s: the loop was not blocked while the turn waited
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT n FROM t ORDER BY n"))).scalars()
            assert rows.all() == [1, 2]
    finally:
        await engine.dispose()


async def test_checkpoints_keep_the_write_ahead_log_short(tmp_path: Path) -> None:
    """SQLite's own automatic checkpoints (every 1,000 pages of 4 KB) keep the log from
    growing with every commit: 2,000 commits of a 3 KB row (some 16 MB of log without
    checkpoints) leave it near the checkpoint's size."""
    engine = create_engine(f"sqlite:///{tmp_path / 'wal.db'}")
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (n INTEGER, pad TEXT)"))
        for n in range(2_000):
            async with engine.begin() as connection:
                await connection.execute(
                    text("INSERT INTO t VALUES (:n, :pad)"), {"n": n, "pad": "x" * 3000}
                )
        assert (tmp_path / "wal.db-wal").stat().st_size < 5_000_000
    finally:
        await engine.dispose()
