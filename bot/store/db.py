"""The async engine for DATABASE_URL, with each backend's settings for safe concurrency."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from bot.config import async_database_url
from bot.store import sqlite_driver

#: how long SQLite waits for another writer before "database is locked"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def create_engine(database_url: str) -> AsyncEngine:
    """An engine for ``sqlite:///...`` or ``postgresql://...`` (the async driver is chosen)."""
    url = async_database_url(database_url)
    if url.startswith("sqlite"):
        # a few connections: the process's transactions take turns anyway (see
        # sqlite_driver), but a pool of one hands its connection on once per turn of the
        # event loop, which under load is what a turn's statements would wait for
        engine = create_async_engine(
            url,
            async_creator=sqlite_driver.connector(url, SQLITE_BUSY_TIMEOUT_MS / 1000),
            pool_size=4,
            max_overflow=0,
            pool_timeout=SQLITE_BUSY_TIMEOUT_MS / 1000,
        )
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
        event.listen(engine.sync_engine, "before_cursor_execute", _sqlite_where_to_run)
        return engine
    # pre-ping: a restarted PostgreSQL costs one failed check, not a failed turn
    return create_async_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)


def autocommit(engine: AsyncEngine) -> AsyncEngine:
    """The engine for single statements that need no BEGIN and COMMIT round trips."""
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def read_only(engine: AsyncEngine) -> AsyncEngine:
    """The engine for transactions that only read. On SQLite they begin deferred and take
    no turn among the process's writers: in WAL mode a reader neither waits for a writer
    nor holds one up (else a health check, or an admin page's scan, would stop every turn's
    writes while it runs)."""
    return engine.execution_options(sqlite_read_only=True)


def on_loop(engine: AsyncEngine) -> AsyncEngine:
    """The engine for a turn's own short statements (indexed reads and writes of a few
    rows): on SQLite they run on the event loop's thread, not in a trip to SQLite's (see
    ``sqlite_driver``). Scans and bulk work keep to ``engine``."""
    return engine.execution_options(sqlite_on_loop=True)


def insert_for(engine: AsyncEngine):  # type: ignore[no-untyped-def]
    """The backend's INSERT, which has ON CONFLICT (DO NOTHING / DO UPDATE)."""
    return (postgresql if engine.dialect.name == "postgresql" else sqlite).insert


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    # WAL lets readers and one writer work at once (a writer waits for another: see
    # sqlite_driver)
    dbapi_connection.isolation_level = None  # we issue BEGIN ourselves (see below)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection) -> None:  # type: ignore[no-untyped-def]
    # BEGIN IMMEDIATE takes the write lock up front, so a transaction waits for another's
    # at its start, instead of a deferred one failing with "database is locked" when it
    # upgrades; one that only reads needs no lock (see read_only)
    driver = connection.connection.driver_connection
    if connection.get_execution_options().get("sqlite_read_only", False):
        driver.begin_with_next_statement("BEGIN", writes=False)
    else:
        driver.begin_with_next_statement("BEGIN IMMEDIATE")


def _sqlite_where_to_run(connection, _cursor, _statement, _parameters, context, _many) -> None:  # type: ignore[no-untyped-def]
    driver = connection.connection.driver_connection
    driver.on_loop = context.execution_options.get("sqlite_on_loop", False)
