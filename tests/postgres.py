"""Throwaway PostgreSQL databases on a server, for the tests and the benchmarks: each gets
a database of its own, created on that server and dropped after."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator

import asyncpg

from bot.store.migrate import upgrade


@contextlib.contextmanager
def fresh_database(server_url: str, prefix: str, *, migrated: bool = True) -> Iterator[str]:
    """The URL of a new database on the server of ``server_url`` (any database of it);
    migrated to head unless ``migrated`` is False (then it has no tables at all)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        url = server_url.rsplit("/", 1)[0] + "/" + name
        if migrated:
            upgrade(url)
        yield url
    finally:
        admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def admin(server_url: str, statement: str) -> None:
    async def run() -> None:
        url = server_url.replace("postgresql+asyncpg://", "postgresql://")
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())
