"""The connection to HubSpot: one aiohttp session for the process (keep-alive), a private
app's token, retries and errors. aiohttp rather than httpx2 or HubSpot's own client: a
request costs a third of httpx2's CPU (bench/README.md, "CRM look-ups").

A 429 is waited out per its Retry-After (or HubSpot's X-HubSpot-RateLimit-Interval-
Milliseconds) and a 5xx of a read is tried again, both within the tool call's time limit
(bot.tools.crm.retry). Every failure becomes a ``ToolError`` the model can act on
(``CredentialsRefused`` for the token, ``NotFound`` for a missing record), or
``OutcomeUnknown`` for a write whose answer was lost.
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import logging
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from tenacity import AsyncRetrying

from bot.config import CrmSettings
from bot.errors import ToolError
from bot.tools.crm.base import CredentialsRefused, NotFound, OutcomeUnknown, unreadable
from bot.tools.crm.retry import REQUEST_SHARE, policy, tls_context

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: an idle connection is kept this long (aiohttp's default, 15 s, closes it between turns)
KEEPALIVE_S = 120.0


class Failed(Exception):
    """HubSpot answered with an error status."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.headers = headers
        self.body = body


class HubSpotConnection:
    """The process's one HubSpot client; ``request`` sends one API request within the time
    limit, retried as the module says."""

    def __init__(self, settings: CrmSettings, time_limit: float) -> None:
        if not settings.HUBSPOT_ACCESS_TOKEN:
            raise ValueError("HUBSPOT_ACCESS_TOKEN must be set")
        self.token = settings.HUBSPOT_ACCESS_TOKEN
        self.base_url = settings.HUBSPOT_BASE_URL
        self.time_limit = time_limit
        self.timeout = round(time_limit * REQUEST_SHARE, 2)
        self._tls = tls_context(settings.ca_bundle)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        """The session, made in the event loop of its first request (aiohttp's rule)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(
                    ssl=self._tls if self._tls is not None else True,
                    keepalive_timeout=KEEPALIVE_S,
                ),
            )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        action: str,
        json: Any = None,
        params: dict[str, str] | None = None,
        write: bool = False,
    ) -> Any:
        """The JSON HubSpot answers; its failures explained."""
        until = time.monotonic() + self.time_limit
        retryable = _write_retryable if write else _retryable
        retrying = AsyncRetrying(**policy(until, retryable, _retry_after, "hubspot"))
        try:
            return jsonlib.loads(await retrying(self._send, method, path, json, params))
        except Failed as failed:
            raise _explain(failed, action, write) from None
        except aiohttp.ClientConnectorError:
            raise ToolError(
                f"Could not reach HubSpot while trying to {action}; try again later."
            ) from None
        except TimeoutError:
            if write:
                raise OutcomeUnknown(f"HubSpot did not answer within {self.timeout:g} s") from None
            raise ToolError(
                f"HubSpot did not answer within {self.timeout:g} s while trying to {action}. "
                "It may be down or overloaded; try again later."
            ) from None
        except (aiohttp.ClientError, ValueError) as exc:
            raise unreadable("HubSpot", action, exc, write) from None

    async def _send(
        self, method: str, path: str, json: Any, params: dict[str, str] | None
    ) -> bytes:
        url = f"{self.base_url}{path}"
        async with self._http().request(method, url, json=json, params=params) as response:
            body = await response.read()
            if response.status >= 400:
                raise Failed(response.status, response.headers, body)
            return body

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            await asyncio.sleep(0)  # aiohttp: let the TLS transports close


def message_of(failed: Failed) -> tuple[str, str]:
    """HubSpot's error body: its category (VALIDATION_ERROR, MISSING_SCOPES, ...) and message."""
    try:
        body = jsonlib.loads(failed.body)
    except ValueError:
        return "", ""
    if not isinstance(body, dict):
        return "", ""
    return str(body.get("category") or ""), " ".join(str(body.get("message") or "").split())[:300]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, Failed):
        return exc.status in RETRY_STATUSES
    return isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ServerDisconnectedError)


def _write_retryable(exc: BaseException) -> bool:
    """A write is tried again only after a 429 (refused before anything was done) or when
    the connection could not be made."""
    if isinstance(exc, Failed):
        return exc.status == 429
    return isinstance(exc, aiohttp.ClientConnectorError)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds to wait before another try: Retry-After, or for a 429 without it HubSpot's
    X-HubSpot-RateLimit-Interval-Milliseconds (the window the limit counts in)."""
    if not isinstance(exc, Failed):
        return None
    headers = exc.headers
    try:
        if "Retry-After" in headers:
            return max(0.0, float(headers["Retry-After"]))
        if exc.status == 429 and "X-HubSpot-RateLimit-Interval-Milliseconds" in headers:
            return max(0.0, float(headers["X-HubSpot-RateLimit-Interval-Milliseconds"]) / 1000)
    except ValueError:
        pass
    return None


def _explain(failed: Failed, action: str, write: bool) -> Exception:
    category, message = message_of(failed)
    detail = f": {message}" if message else "."
    status = failed.status
    if status == 401:
        return CredentialsRefused(
            "HubSpot refused the bot's access token (HTTP 401). An admin must check "
            "HUBSPOT_ACCESS_TOKEN; retrying will not help."
        )
    if status == 403:
        return ToolError(
            f"HubSpot denied permission to {action} ({category or 'HTTP 403'}){detail}"
        )
    if status == 404:
        return NotFound(f"HubSpot has no such record (trying to {action}).")
    if status == 429:
        wait = _retry_after(failed)
        when = f"in {wait:.0f} s" if wait is not None else "in a minute"
        return ToolError(f"HubSpot is rate limiting the bot; try again {when}.")
    if write and status >= 500:
        return OutcomeUnknown(f"HubSpot answered HTTP {status}")
    if status >= 500:
        return ToolError(
            f"HubSpot failed with HTTP {status} while trying to {action}. Try again later."
        )
    return ToolError(f"HubSpot rejected the request to {action} ({category or status}){detail}")
