"""Limits that keep one person, or a crowd, from running up the model bill.

* ``PerPerson``: at most RATE_LIMIT_PER_USER new turns per person in any 10 minutes (a moving
  window, the ``limits`` library's, in this process's memory: with several processes each
  counts its own share).
* ``ModelSlots``: at most MAX_CONCURRENT_TURNS model requests in flight in this process. A
  new turn starts only if a slot frees within ``ADMIT_WAIT_S``; a turn under way waits for
  one (within its deadline), so it is never dropped halfway.

A turn refused by either is stored like any other (the question is kept, its outcome is
``error`` with the reason), and the person reads a polite reply saying when to ask again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator

from limits import RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

from bot.errors import TurnRefused

#: the per-person window, minutes
WINDOW_MIN = 10
#: a burst of questions a few at a time over the slots clears in a moment: a new turn
#: waits this long for a free slot before its person is asked to come back
ADMIT_WAIT_S = 2.0

TOO_MANY = (
    "You have asked me {limit} questions in the last {window} minutes, as many as I answer "
    "for one person in that time. I kept this one, but did not work on it: please ask again "
    "in about {minutes} minute{s}."
)
BUSY = (
    "I am answering too many questions at once right now, so I did not work on this one "
    "(it is kept). Please ask again in a minute."
)


class PerPerson:
    """New turns per person in a moving window of WINDOW_MIN minutes (0: no limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._item = RateLimitItemPerMinute(max(limit, 1), WINDOW_MIN)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    async def admit(self, user_id: str | None) -> None:
        """Count a new turn of ``user_id``; raises TurnRefused, saying why, when it is one too
        many. A turn of nobody in particular (the command line) is not counted."""
        if not self.limit or user_id is None:
            return
        if await self._limiter.hit(self._item, user_id):
            return
        stats = await self._limiter.get_window_stats(self._item, user_id)
        minutes = max(1, math.ceil((stats.reset_time - time.time()) / 60))
        text = TOO_MANY.format(
            limit=self.limit, window=WINDOW_MIN, minutes=minutes, s="" if minutes == 1 else "s"
        )
        raise TurnRefused(text, kind="rate_limited")


class ModelSlots:
    """Model requests in flight in this process, at most ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = asyncio.Semaphore(size)

    async def admit(self) -> None:
        """A new turn may start: a slot is free, or frees within ADMIT_WAIT_S. Raises
        TurnRefused otherwise."""
        try:
            async with asyncio.timeout(ADMIT_WAIT_S):
                await self._free.acquire()
        except TimeoutError:
            raise TurnRefused(BUSY, kind="busy") from None
        self._free.release()  # taken again for each request (``request``)

    @contextlib.asynccontextmanager
    async def request(self) -> AsyncIterator[None]:
        """Held while one model request is in flight."""
        async with self._free:
            yield
