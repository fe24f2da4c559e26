"""aiosqlite, with the short statements of a turn run on the event loop's thread.

aiosqlite runs the sqlite3 connection on a thread of its own, so every statement is a trip
there and back: a thread switch and a wake-up of the event loop, and under load a wait for
the loop's turn, while the connection (and SQLite's write lock) is held and other turns
queue for it. A short indexed statement takes SQLite tens of microseconds, less than the
trip. So:

* A statement marked ``on_loop`` (the ``sqlite_on_loop`` execution option, see
  ``bot.store.db.on_loop``) runs where it is called, and so does its transaction's COMMIT
  or ROLLBACK: such a transaction runs from BEGIN to COMMIT without giving the loop up.
* Anything else (an admin page's scan, a purge) runs on the thread, one trip per statement:
  the cursor executes it and reads all its rows at once.
* A transaction's BEGIN goes along with its first statement.
* The process's transactions on a file take turns on an asyncio lock (``File.writers``) before
  their BEGIN, so they never meet SQLite's lock held by one another; one begun for reading
  only takes no turn (in WAL mode readers and the writer do not wait for one another).
* SQLite's busy timeout is 0: a statement that finds the database locked by another process
  fails at once, before it changed anything, and is tried again on the thread every few
  milliseconds until the busy timeout is up (SQLite's own busy handler sleeps up to 100 ms
  between tries).
* SQLite's automatic checkpoints, which write the database file and fsync it inside a
  COMMIT, are off; the thread runs one every CHECKPOINT_EVERY commits to the file instead.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import aiosqlite
from sqlalchemy.engine import make_url

#: commits between two checkpoints (each commit of a turn adds a few pages to the WAL;
#: SQLite's own automatic checkpoint comes at 1,000 pages)
CHECKPOINT_EVERY = 200
_CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"


def connector(database_url: str, busy_timeout: float):  # type: ignore[no-untyped-def]
    """An ``async_creator`` for ``create_async_engine``: a new connection to the SQLite
    database of ``database_url``, opened with the arguments SQLAlchemy would use; a
    statement waits up to ``busy_timeout`` s for another connection's lock."""
    url = make_url(database_url)
    args, kwargs = url.get_dialect()().create_connect_args(url)
    # statements run on the loop's thread as well as on the connection's own
    kwargs.update(timeout=0, check_same_thread=False)

    path = os.path.abspath(args[0]) if args else ""

    async def connect() -> OneTripConnection:
        connection = OneTripConnection(partial(sqlite3.connect, *args, **kwargs), 64)
        connection.busy_timeout_ms = round(busy_timeout * 1000)
        connection.file = _file(path)
        # like aiosqlite.connect under SQLAlchemy: a forgotten connection must not keep
        # the process alive
        connection._thread.daemon = True
        await connection
        _statement(connection._conn, None, "execute", "PRAGMA wal_autocheckpoint=0", ())
        return connection

    return connect


class OneTripConnection(aiosqlite.Connection):
    #: a BEGIN to run just before the next statement, in the same trip
    begin: str | None = None
    #: whether that transaction writes (and so takes its turn among the process's writers)
    begin_writes = True
    #: whether the statements under way run on the event loop's thread
    on_loop = False
    busy_timeout_ms = 0
    file: File
    _writing = False

    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    def begin_with_next_statement(self, begin: str, *, writes: bool = True) -> None:
        """Start a transaction with ``begin`` (e.g. "BEGIN IMMEDIATE"), sent along with the
        next statement; a transaction that ends before it sends none ends as it began.
        ``writes=False``: it only reads, and needs no turn among the writers."""
        self.begin, self.begin_writes = begin, writes

    async def commit(self) -> None:
        if await self._end(self._conn.commit):
            self.file.commits += 1
            if self.file.commits % CHECKPOINT_EVERY == 0:
                await self._execute(_statement, self._conn, None, "execute", _CHECKPOINT, ())

    async def rollback(self) -> None:
        await self._end(self._conn.rollback)

    async def close(self) -> None:
        self._done_writing()
        await super().close()

    async def _end(self, end: Any) -> bool:
        """End the transaction under way, if any, where its statements ran."""
        begin, self.begin = self.begin, None
        try:
            if begin is not None or not self._conn.in_transaction:  # none was begun
                return False
            if self.on_loop:
                end()
            else:
                await self._execute(end)
            return True
        finally:
            self._done_writing()

    async def _start_writing(self) -> None:
        try:
            async with asyncio.timeout(self.busy_timeout_ms / 1000):
                await self.file.writers.acquire()
        except TimeoutError:
            # as SQLite says it, when another connection held the lock for as long
            raise sqlite3.OperationalError("database is locked") from None
        self._writing = True

    def _done_writing(self) -> None:
        if self._writing:
            self._writing = False
            self.file.writers.release()


class OneTripCursor:
    """The part of aiosqlite's Cursor that SQLAlchemy's adapter uses; ``execute`` runs the
    statement and reads all its rows at once, on the loop's thread or in one trip to the
    connection's."""

    arraysize = 1

    def __init__(self, connection: OneTripConnection) -> None:
        self._connection = connection
        self._rows: list[Any] = []
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None

    async def __aenter__(self) -> OneTripCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._rows = []

    async def execute(self, sql: str, parameters: Sequence[Any] = ()) -> OneTripCursor:
        return await self._run("execute", sql, parameters)

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> OneTripCursor:
        return await self._run("executemany", sql, list(parameters))

    async def _run(self, method: str, sql: str, parameters: Any) -> OneTripCursor:
        connection = self._connection
        begin, connection.begin = connection.begin, None
        if begin is not None and connection.begin_writes:
            await connection._start_writing()
        done = None
        if connection.on_loop:
            try:
                done = _statement(connection._conn, begin, method, sql, parameters)
            except sqlite3.OperationalError as error:
                # locked by another process: tried again below, where waiting blocks no one
                if not _retryable(error, connection._conn, begin, method):
                    raise
        if done is None:
            done = await connection._execute(_waiting, connection, begin, method, sql, parameters)
        self.description, self.rowcount, self.lastrowid, self._rows = done
        return self

    async def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        size = size or self.arraysize
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def close(self) -> None:
        self._rows = []


Done = tuple[Any, int, int | None, list[Any]]


@dataclass
class File:
    """What this process's connections to one database file share (per event loop)."""

    #: held from a transaction's BEGIN to its end
    writers: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: commits so far, for the checkpoints
    commits: int = 0


_FILES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, File]] = (
    weakref.WeakKeyDictionary()
)


def _file(path: str) -> File:
    files = _FILES.setdefault(asyncio.get_running_loop(), {})
    return files.setdefault(path, File())


def _statement(
    connection: sqlite3.Connection, begin: str | None, method: str, sql: str, parameters: Any
) -> Done:
    cursor = connection.cursor()
    try:
        if begin is not None:
            cursor.execute(begin)
        getattr(cursor, method)(sql, parameters)
        rows = cursor.fetchall() if cursor.description else []
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


def _waiting(connection: OneTripConnection, *statement: Any) -> Done:
    """On the connection's thread: run a statement, waiting for another process's lock.
    It is tried again every few milliseconds: SQLite's own busy handler sleeps ever longer
    between tries, up to 100 ms, and could keep missing short transactions."""
    sqlite = connection._conn
    begin, method = statement[0], statement[1]
    deadline = time.monotonic() + connection.busy_timeout_ms / 1000
    pause = 0.001
    while True:
        try:
            return _statement(sqlite, *statement)
        except sqlite3.OperationalError as error:
            if not _retryable(error, sqlite, begin, method) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _retryable(
    error: sqlite3.OperationalError, sqlite: sqlite3.Connection, begin: str | None, method: str
) -> bool:
    """Whether ``error`` is the database found locked before the statement did anything,
    so that running it again is safe: its BEGIN failed, or it is one statement outside a
    transaction (an executemany there commits row by row, and some rows may be in)."""
    locked = getattr(error, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY
    return locked and not sqlite.in_transaction and (begin is not None or method == "execute")
