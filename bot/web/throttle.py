"""LoginThrottle: wrong admin tokens are counted per client address and overall, and past
a limit every try (right or wrong) is refused with 429 until the window moves on, so the
token cannot be guessed at speed, from one address or from many.

Counted in this process's memory (the ``limits`` library's moving window): with several
processes each counts its own. Behind a proxy every client has the proxy's address unless
uvicorn is told to trust its X-Forwarded-For (``--forwarded-allow-ips``).
"""

from __future__ import annotations

import hmac
import logging
import math
import time

from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter
from starlette.requests import Request

log = logging.getLogger(__name__)

#: wrong tokens allowed from one address, and from all of them together
PER_ADDRESS = "5/minute"
OVERALL = "30/minute"


class Throttled(Exception):
    """Too many wrong tokens lately; try again in ``retry_after_s``."""

    def __init__(self, retry_after_s: int, everyone: bool) -> None:
        super().__init__(retry_after_s)
        self.retry_after_s = retry_after_s
        self.everyone = everyone


class LoginThrottle:
    def __init__(self, per_address: str = PER_ADDRESS, overall: str = OVERALL) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._per_address: RateLimitItem = parse(per_address)
        self._overall: RateLimitItem = parse(overall)

    async def try_token(self, request: Request, candidate: str, token: str, how: str) -> bool:
        """Whether ``candidate`` is ``token`` (in constant time); a wrong one is counted and
        logged as ``how`` the path. Raises Throttled, before comparing, once too many were
        wrong."""
        await self.check(request)
        if hmac.compare_digest(candidate.encode(), token.encode()):
            return True
        await self.failed(request, how)
        return False

    async def check(self, request: Request) -> None:
        """Raise Throttled when this request's address, or everyone, failed too often."""
        address = client_address(request)
        for limit, key, everyone in self._keys(address):
            if not await self._limiter.test(limit, key):
                reset_at, _ = await self._limiter.get_window_stats(limit, key)
                wait_s = max(1, math.ceil(reset_at - time.time()))
                whom = "every address" if everyone else address
                log.info("admin token not tried for %d s: too many wrong from %s", wait_s, whom)
                raise Throttled(wait_s, everyone)

    async def failed(self, request: Request, how: str) -> None:
        """Count a wrong token (never logged itself)."""
        address = client_address(request)
        for limit, key, _ in self._keys(address):
            await self._limiter.hit(limit, key)
        log.warning("wrong admin token from %s (%s %s)", address, how, request.url.path)

    def _keys(self, address: str) -> list[tuple[RateLimitItem, str, bool]]:
        return [(self._per_address, address, False), (self._overall, "*", True)]


def client_address(request: Request) -> str:
    return request.client.host if request.client else "an unknown address"
