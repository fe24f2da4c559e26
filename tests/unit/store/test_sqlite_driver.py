"""SQLite through the one-trip cursor: what SQLAlchemy reads of a statement is all there."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError

from bot.store.db import create_engine


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'driver.db'}")
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE)"))
    yield engine
    await engine.dispose()


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


async def test_statements_from_many_tasks_share_the_connection(engine) -> None:  # type: ignore[no-untyped-def]
    async def insert(n: int) -> None:
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO t (name) VALUES (:n)"), {"n": str(n)})

    await asyncio.gather(*(insert(n) for n in range(50)))
    async with engine.connect() as connection:
        assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar() == 50


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
