"""Alembic environment: async engine, and the whole upgrade in one transaction that holds
the database (an advisory lock on PostgreSQL, BEGIN IMMEDIATE on SQLite), so that several
processes starting at once migrate once (Alembic has no lock of its own)."""

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from bot.store.db import create_engine
from bot.store.models import Base

#: any constant; every process of the bot agrees on it
MIGRATION_LOCK_KEY = 0x626F7401


def _database_url() -> str:
    url = context.config.attributes.get("database_url")
    if url:
        return url
    from bot.config import load_settings

    return load_settings().DATABASE_URL


def _migrate(connection: Connection) -> None:
    # one transaction for the whole upgrade, begun before Alembic looks: on SQLite (no
    # transactional DDL) Alembic would otherwise commit after each migration, and a process
    # started at the same time could get in between and run the next migrations again
    with connection.begin():
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            transaction_per_migration=False,
        )
        with context.begin_transaction():
            context.run_migrations()


async def _run() -> None:
    engine = create_engine(_database_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_migrate)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
asyncio.run(_run())
