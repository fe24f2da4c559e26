"""A fresh, migrated PostgreSQL database for a benchmark, dropped afterwards: a run neither
reads what an earlier one left nor meets a schema that an older build cannot read."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator

import asyncpg

from bot.store.migrate import upgrade


@contextlib.contextmanager
def fresh_postgres(server_url: str, prefix: str = "bench") -> Iterator[str]:
    """The URL of a new database on the server of ``server_url`` (any database of it)."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    _admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        url = server_url.rsplit("/", 1)[0] + "/" + name
        upgrade(url)
        yield url
    finally:
        _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(server_url: str, statement: str) -> None:
    async def run() -> None:
        connection = await asyncpg.connect(server_url)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())
