"""The engines for DATABASE_URL, each backend set up for safe concurrency; how a store
runs its writes (``Engines.transaction`` and ``Engines.statement``); and the one error
every store raises (StoreError).

A store writes with plain synchronous SQLAlchemy Core functions, run by the engines:

* PostgreSQL (asyncpg): through SQLAlchemy's bridge for synchronous code (``run_sync``),
  on one pool whose connections are pinged before use (``_ping``). A connection broken by
  a server restart mid-statement fails that statement; the next transaction draws a live
  connection. A write that can be single statements, each atomic by itself, runs so, with
  no BEGIN and COMMIT around it (``one_statement``).
* SQLite: SQLite has one writer, so a process has one writing connection, on a thread of
  its own (``SQLiteWriter``), and each transaction runs whole on it: one trip from the
  event loop, where aiosqlite makes three or four a statement. The connection is
  SQLAlchemy's pysqlite dialect with its documented recipe: WAL, so readers and the writer
  do not wait for one another; a busy timeout, so a writer waits for another process's
  write lock; ``BEGIN IMMEDIATE``, so a transaction takes the write lock at its start
  instead of failing when it upgrades from reading. Reads go through aiosqlite
  (``Engines.reads``), a pool that begins deferred, so a health check never waits behind a
  write.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import sqlalchemy
from sqlalchemy import Connection, Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import AdaptedConnection
from sqlalchemy.exc import InvalidatePoolError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.pool import (
    AsyncAdaptedQueuePool,
    ConnectionPoolEntry,
    PoolProxiedConnection,
    QueuePool,
)
from sqlalchemy.util import await_only, greenlet_spawn

from bot.config import async_database_url
from bot.errors import StoreError

#: how long SQLite waits for another process's write lock before "database is locked"
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: connections for reading SQLite (WAL readers run side by side)
SQLITE_READERS = 4

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
#: a store's write: synchronous SQLAlchemy Core on the connection it is given
Work = Callable[[Connection], T]


# speed device: see bench/README.md, "SQLite writer thread"
class SQLiteWriter:
    """The one writing connection of a process to a SQLite file, on a thread of its own."""

    def __init__(self, database_url: str) -> None:
        url = "sqlite://" + database_url.partition("://")[2]
        self.engine = sqlalchemy.create_engine(
            url, poolclass=QueuePool, pool_size=1, max_overflow=0
        )
        _sqlite_recipe(self.engine, "BEGIN IMMEDIATE")
        self._single_statements = self.engine.execution_options(**{_SINGLE_STATEMENTS: True})
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._closed = False

    async def run(self, work: Work[T], *, transaction: bool) -> T:
        """``work`` on the writer's thread: in a transaction, or as single statements."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run, work, transaction)

    def _run(self, work: Work[T], transaction: bool) -> T:
        engine = self.engine if transaction else self._single_statements
        return _run_on(engine, work, transaction)

    async def dispose(self) -> None:
        """Close the connection and stop the thread (once: services may be closed twice)."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown(wait=False)


@dataclass(frozen=True)
class Engines:
    """The engine a store writes with and the one it reads with (the same on PostgreSQL);
    ``bookkeeping`` writes what a crash of the database may lose (see create_engines);
    ``writer``: SQLite's writing thread (see SQLiteWriter)."""

    writes: AsyncEngine
    reads: AsyncEngine
    bookkeeping: AsyncEngine | None = None
    writer: SQLiteWriter | None = None

    async def transaction(self, work: Work[T], *, one_statement: Work[T | None] | None = None) -> T:
        """Run ``work`` in one write transaction. ``one_statement`` is the same write for
        PostgreSQL as single statements, each atomic by itself (a data-modifying CTE makes
        one of several rows): it runs there instead, with no transaction around it, and
        ``work`` only when it declines (returns None)."""
        if self.writer is not None:
            return await self.writer.run(work, transaction=True)
        if one_statement is not None and self.dialect == "postgresql":
            done = await self.statement(one_statement)
            if done is not None:
                return done
        return await run_sync(self.writes, work, transaction=True)

    async def statement(self, work: Work[T]) -> T:
        """Run ``work``'s statements each as a transaction of its own (one INSERT of several
        rows is atomic): no BEGIN and COMMIT round trips around them."""
        if self.writer is not None:
            return await self.writer.run(work, transaction=False)
        return await run_sync(self._single_statements, work)

    async def read(self, work: Work[T]) -> T:
        """Run ``work``'s reads on the turn's path: on PostgreSQL as single statements (no
        BEGIN and ROLLBACK around them), on SQLite on a reading connection, never behind
        the writer's queue."""
        if self.writer is not None:
            return await run_sync(self.reads, work)
        return await run_sync(self._single_statements, work)

    @functools.cached_property
    def _single_statements(self) -> AsyncEngine:
        # speed device: see bench/README.md, "single-statement engine built once"
        return single_statements(self.writes)

    @property
    def ledger(self) -> AsyncEngine:
        """The engine for bookkeeping writes (``writes`` where there is no other)."""
        return self.bookkeeping or self.writes

    @classmethod
    def of(cls, engines: Engines | AsyncEngine) -> Engines:
        """``engines``, or one engine for both reading and writing."""
        return engines if isinstance(engines, Engines) else cls(engines, engines)

    @property
    def dialect(self) -> str:
        return self.writes.dialect.name

    async def dispose(self) -> None:
        for engine in {id(e): e for e in (self.writes, self.reads, self.bookkeeping) if e}.values():
            await engine.dispose()
        if self.writer is not None:
            await self.writer.dispose()


# speed device: see bench/README.md, "one bridge pass a write"
async def run_sync(engine: AsyncEngine, work: Work[T], *, transaction: bool = False) -> T:
    """``work`` on a connection of ``engine`` (in a transaction when ``transaction``): the
    connection is drawn, used and given back in one pass through SQLAlchemy's bridge for
    synchronous code (greenlet_spawn, as ``AsyncConnection.run_sync`` does), where
    ``AsyncConnection`` makes a pass for each of the three."""
    return await greenlet_spawn(_run_on, engine.sync_engine, work, transaction)


def _run_on(engine: sqlalchemy.Engine, work: Work[T], transaction: bool) -> T:
    if transaction:
        with engine.begin() as connection:
            return work(connection)
    with engine.connect() as connection:
        return work(connection)


def create_engines(database_url: str) -> Engines:
    """The engines for ``sqlite:///...`` or ``postgresql://...`` (the async driver is chosen)."""
    url = async_database_url(database_url)
    if not url.startswith("sqlite"):
        engine = create_async_engine(url, pool_size=10, max_overflow=20)
        # who holds a channel, and leases: a commit there need not wait for the disk (a
        # database crash loses at most the last ~0.6 s of them, and every one can be done
        # again: a lease runs out, a job resumes from its journal).
        # speed device: see bench/README.md, "ledger without waiting for the disk"
        # Its statements are idempotent, so its pool pings nothing: a statement that finds
        # its connection ended is tried again on a new one (bot.jobs.postgres._on_ledger).
        asynchronous = {"server_settings": {"synchronous_commit": "off"}}
        ledger = create_async_engine(url, pool_size=5, max_overflow=10, connect_args=asynchronous)
        event.listen(engine.sync_engine, "checkout", _ping)
        return Engines(engine, engine, ledger)
    # a queue is asked for by name: older SQLAlchemy gave file databases no pool
    pooled = {"poolclass": AsyncAdaptedQueuePool, "max_overflow": 0}
    # a writer in line waits out at most the one ahead of it waiting for another process
    wait_s = 2 * SQLITE_BUSY_TIMEOUT_MS / 1000
    writes = create_async_engine(url, pool_size=1, pool_timeout=wait_s, **pooled)
    reads = create_async_engine(url, pool_size=SQLITE_READERS, pool_timeout=wait_s, **pooled)
    _sqlite_recipe(writes.sync_engine, "BEGIN IMMEDIATE")
    _sqlite_recipe(reads.sync_engine, "BEGIN")
    return Engines(writes, reads, writer=SQLiteWriter(database_url))


def create_engine(database_url: str) -> AsyncEngine:
    """One engine for both reading and writing (tests, migrations, tools that read)."""
    return create_engines(database_url).writes


# speed device: see bench/README.md, "one-query ping"
def _ping(
    dbapi_connection: AdaptedConnection, _record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
) -> None:
    """A pooled PostgreSQL connection is pinged before use: one a server restart (or an
    idle timeout) ended is replaced, and the pool with it, instead of failing the turn that
    draws it. SQLAlchemy's own pre-ping for asyncpg is three round trips (BEGIN, a query,
    ROLLBACK, for PgBouncer's transaction mode); this is one simple-protocol query, which
    PgBouncer serves whole; the ledger's pool pings nothing (create_engines). asyncpg's
    is_closed() would cost nothing but misses a connection ended a moment ago."""
    try:
        await_only(dbapi_connection.driver_connection.execute("SELECT 1"))
    except Exception as exc:  # the connection is unusable, whatever the reason
        raise InvalidatePoolError(f"ping failed ({type(exc).__name__})") from exc


def insert_for(
    dialect: str,
) -> Callable[[Table | type[DeclarativeBase]], postgresql.Insert | sqlite.Insert]:
    """The backend's INSERT, which has ON CONFLICT (DO NOTHING / DO UPDATE)."""
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def store_errors(method: F) -> F:
    """Turn the database's failures in ``method`` (async) into StoreError, the one error
    the stores raise: callers never need to know SQLAlchemy."""
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def generator(*args: Any, **kwargs: Any) -> Any:
            try:
                async for item in method(*args, **kwargs):
                    yield item
            except (SQLAlchemyError, OSError) as exc:
                raise StoreError(_reason(exc)) from exc

        return cast(F, generator)

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(_reason(exc)) from exc

    return cast(F, wrapper)


def _reason(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = str(original).splitlines()[0] if str(original) else type(original).__name__
    return f"the database failed ({text[:200]})"


def _sqlite_recipe(engine: sqlalchemy.Engine, begin: str) -> None:
    """SQLAlchemy's recipe for SQLite transactions: the driver's own BEGIN off, ours on."""
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", functools.partial(_sqlite_begin, begin))


def _sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # dbapi_connection: aiosqlite's adapted connection (SQLAlchemy's DBAPI protocol has no
    # isolation_level)
    # the driver's own transaction handling off: the "begin" listener issues BEGIN
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def _sqlite_begin(statement: str, connection: Connection) -> None:
    # a statement run on its own (see single_statements) is a transaction by itself
    if not connection.get_execution_options().get(_SINGLE_STATEMENTS, False):
        connection.exec_driver_sql(statement)


_SINGLE_STATEMENTS = "bot_single_statements"


def single_statements(engine: AsyncEngine) -> AsyncEngine:
    """The engine for statements that are each a transaction of their own (one INSERT of
    several rows is atomic): no BEGIN and COMMIT around them, a round trip less each way on
    PostgreSQL (AUTOCOMMIT), and on SQLite a BEGIN less (its own autocommit)."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="AUTOCOMMIT")
    return engine.execution_options(**{_SINGLE_STATEMENTS: True})
