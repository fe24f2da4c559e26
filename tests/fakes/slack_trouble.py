"""The fake Slack's scripted trouble: errors, rate limits and requests held open, as the
next calls of a method meet them. Mixed into FakeSlack, whose lock guards the state."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict, deque
from typing import Any


class ScriptedTrouble:
    """``fail_next``, ``rate_limit_next``, ``hang_next``; FakeSlack's endpoint takes them."""

    _lock: threading.RLock
    _scripted: defaultdict[str, deque[tuple[str, Any]]]
    _hangs: defaultdict[str, list[list[Any]]]
    _stopping: threading.Event
    held: list[tuple[str, str | None]]

    def fail_next(self, method: str, error: str = "internal_error", times: int = 1) -> None:
        """The next `times` calls to `method` answer {"ok": false, "error": error}."""
        with self._lock:
            self._scripted[method].extend([("fail", error)] * times)

    def rate_limit_next(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        """The next `times` calls to `method` answer HTTP 429 with `Retry-After: retry_after`."""
        with self._lock:
            self._scripted[method].extend([("rate_limit", retry_after)] * times)

    def hang_next(
        self,
        method: str,
        seconds: float,
        *,
        channel: str | None = None,
        after: bool = False,
        times: int = 1,
    ) -> None:
        """Hold the next `times` calls to `method` (in `channel`, if given) open for
        `seconds`: before they are handled, or with `after=True` once they are (a post is in
        the channel, its answer is late). Each one held is added to `held`."""
        with self._lock:
            self._hangs[method].append([channel, seconds, after, times])

    def _take_hang(self, method: str, args: dict[str, Any]) -> tuple[float, bool] | None:
        channel = args.get("channel") or args.get("channel_id")
        with self._lock:
            for hang in self._hangs[method]:
                if hang[0] in (None, channel) and hang[3] > 0:
                    hang[3] -= 1
                    self.held.append((method, channel))
                    return hang[1], hang[2]
        return None

    async def _hold(self, seconds: float) -> None:
        # a thread waits, so stop() ends the hang at once
        await asyncio.to_thread(self._stopping.wait, seconds)
