"""Group commit: writes submitted while one is under way go to the database together, in
one trip, when it is done. A lone write goes at once; a burst costs a few trips, not one a
write (its figures: bench/README.md, "group commit")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class GroupCommit(Generic[Item, Result]):
    """Runs ``write`` once for everything submitted while the previous write ran. ``write``
    returns one result an item, in order; a result that is an exception is raised to that
    item's caller alone (a write that raises fails them all)."""

    def __init__(
        self, write: Callable[[list[Item]], Awaitable[Sequence[Result | BaseException]]]
    ) -> None:
        self._write = write
        self._waiting: list[tuple[Item, asyncio.Future[Result]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        # the requests already read in submit first: a burst starts with one batch
        await asyncio.sleep(0)
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                results = await self._write([item for item, _ in batch])
            except Exception as exc:  # every waiter gets the failure; the next batch is tried
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():  # its caller was cancelled
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
