"""aiosqlite with one trip to SQLite's thread per statement.

aiosqlite runs the sqlite3 connection on a thread of its own, and SQLAlchemy's adapter
makes four trips there for each statement (open a cursor, execute, fetch the rows, close).
Every trip costs a thread switch and a wake-up of the event loop, which is most of what a
statement costs here: a turn runs about a dozen. The cursor below does the four steps in
one trip and keeps the rows, which is what SQLAlchemy's adapter reads from it after; and
a transaction's BEGIN goes along with its first statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

import aiosqlite
from sqlalchemy.engine import make_url


def connector(database_url: str, timeout: float):  # type: ignore[no-untyped-def]
    """An ``async_creator`` for ``create_async_engine``: a new connection to the SQLite
    database of ``database_url``, opened with the arguments SQLAlchemy would use."""
    url = make_url(database_url)
    args, kwargs = url.get_dialect()().create_connect_args(url)
    kwargs["timeout"] = timeout

    async def connect() -> OneTripConnection:
        connection = OneTripConnection(partial(sqlite3.connect, *args, **kwargs), 64)
        # like aiosqlite.connect under SQLAlchemy: a forgotten connection must not keep
        # the process alive
        connection._thread.daemon = True
        return await connection

    return connect


class OneTripConnection(aiosqlite.Connection):
    #: a BEGIN to run just before the next statement, in the same trip
    begin: str | None = None

    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    def begin_with_next_statement(self, begin: str) -> None:
        """Start a transaction with ``begin`` (e.g. "BEGIN IMMEDIATE"), sent along with the
        next statement; a transaction that ends before it sends none ends as it began."""
        self.begin = begin

    async def commit(self) -> None:
        if self.begin is None:
            await super().commit()
        self.begin = None

    async def rollback(self) -> None:
        if self.begin is None:
            await super().rollback()
        self.begin = None


class OneTripCursor:
    """The part of aiosqlite's Cursor that SQLAlchemy's adapter uses; ``execute`` runs the
    statement and reads all its rows in one trip to the connection's thread."""

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
        return await self._trip("execute", sql, parameters)

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> OneTripCursor:
        return await self._trip("executemany", sql, parameters)

    async def _trip(self, method: str, sql: str, parameters: Any) -> OneTripCursor:
        connection = self._connection
        begin, connection.begin = connection.begin, None
        done = await connection._execute(_run, connection, begin, method, sql, parameters)
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


def _run(
    connection: OneTripConnection, begin: str | None, method: str, sql: str, parameters: Any
) -> tuple[Any, int, int | None, list[Any]]:
    # on the connection's thread
    cursor = connection._conn.cursor()
    try:
        if begin is not None:
            cursor.execute(begin)
        getattr(cursor, method)(sql, parameters)
        rows = cursor.fetchall() if cursor.description else []
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()
