"""AdminSessionStore: the admin pages' logins (see AdminSessionRow), by the SHA-256 of each
session's id."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.messages import utcnow
from bot.store.db import Engines, store_errors
from bot.store.models import AdminSessionRow as Row


class AdminSessionStore:
    def __init__(self, engines: Engines | AsyncEngine) -> None:
        self.engines = Engines.of(engines)

    @store_errors
    async def add(self, id_hash: str, token_key: str, csrf: str, expires_at: datetime) -> None:
        """Keep a new session; the expired ones go at the same time."""

        def work(connection: Connection) -> None:
            now = utcnow()
            connection.execute(delete(Row).where(Row.expires_at <= now))
            connection.execute(
                insert(Row).values(
                    id_hash=id_hash,
                    token_key=token_key,
                    csrf=csrf,
                    created_at=now,
                    expires_at=expires_at,
                )
            )

        await self.engines.transaction(work)

    @store_errors
    async def csrf_of(self, id_hash: str, token_key: str) -> str | None:
        """The CSRF token of a session that is still open under this token, or None."""
        query = select(Row.csrf).where(
            Row.id_hash == id_hash, Row.token_key == token_key, Row.expires_at > utcnow()
        )
        async with self.engines.reads.connect() as connection:
            return await connection.scalar(query)

    @store_errors
    async def remove_others(self, token_key: str) -> int:
        """Forget every session of another token; how many went."""
        statement = delete(Row).where(Row.token_key != token_key)
        result = await self.engines.statement(lambda connection: connection.execute(statement))
        return result.rowcount or 0

    @store_errors
    async def remove(self, id_hash: str) -> None:
        statement = delete(Row).where(Row.id_hash == id_hash)
        await self.engines.statement(lambda connection: connection.execute(statement))
