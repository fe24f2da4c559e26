"""ChannelPacer: Slack allows about one message a second per channel; posts wait their turn."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

#: Slack allows about one message a second per channel
POST_INTERVAL_S = 1.0


class ChannelPacer:
    """One poster per channel at a time, at most one message per ``interval``."""

    def __init__(self, interval: float = POST_INTERVAL_S) -> None:
        self.interval = interval
        self._slots: dict[str, _Slot] = {}

    @contextlib.asynccontextmanager
    async def turn(self, channel: str) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Hold the channel for one answer; call the yielded ``pace()`` before each post."""
        slot = self._slots.setdefault(channel, _Slot())
        slot.users += 1
        try:
            async with slot.lock:
                yield slot.pace_with(self.interval)
        finally:
            slot.users -= 1
            # kept for one interval after the last post, so the next answer is paced too
            asyncio.get_running_loop().call_later(self.interval, self._forget, channel, slot)

    def _forget(self, channel: str, slot: _Slot) -> None:
        if slot.users == 0 and self._slots.get(channel) is slot:
            del self._slots[channel]


class _Slot:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0
        self.last_post = float("-inf")

    def pace_with(self, interval: float) -> Callable[[], Awaitable[None]]:
        async def pace() -> None:
            wait = self.last_post + interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.last_post = time.monotonic()

        return pace
