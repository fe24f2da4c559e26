"""The connection to HubSpot: one httpx2 client for the process (keep-alive), a private
app's token, retries and errors.

A 429 is waited out per its Retry-After (or HubSpot's X-HubSpot-RateLimit-Interval-
Milliseconds) and a 5xx of a read is tried again, both within the tool call's time limit
(bot.tools.crm.retry). Every failure becomes a ``ToolError`` the model can act on
(``CredentialsRefused`` for the token, ``NotFound`` for a missing record), or
``OutcomeUnknown`` for a write whose answer was lost.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx2
from tenacity import AsyncRetrying

from bot.config import CrmSettings
from bot.errors import ToolError
from bot.tools.crm.base import CredentialsRefused, NotFound, OutcomeUnknown
from bot.tools.crm.retry import REQUEST_SHARE, policy, tls_context

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: an idle connection is kept this long (httpx's default, 5 s, would close it between turns)
KEEPALIVE_S = 120.0


class Failed(Exception):
    """HubSpot answered with an error status."""

    def __init__(self, response: httpx2.Response) -> None:
        super().__init__(response.status_code)
        self.response = response
        self.status = response.status_code


class HubSpotConnection:
    """The process's one HubSpot client; ``request`` sends one API request within the time
    limit, retried as the module says."""

    def __init__(self, settings: CrmSettings, time_limit: float) -> None:
        if not settings.HUBSPOT_ACCESS_TOKEN:
            raise ValueError("HUBSPOT_ACCESS_TOKEN must be set")
        self.token = settings.HUBSPOT_ACCESS_TOKEN
        self.time_limit = time_limit
        self.timeout = round(time_limit * REQUEST_SHARE, 2)
        context = tls_context(settings.ca_bundle)
        self.http = httpx2.AsyncClient(
            base_url=settings.HUBSPOT_BASE_URL,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=self.timeout,
            verify=context if context is not None else True,
            limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_S),
        )

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
            response: httpx2.Response = await retrying(self._send, method, path, json, params)
            return response.json()
        except Failed as failed:
            raise _explain(failed, action, write) from None
        except httpx2.TimeoutException as exc:
            if write and not isinstance(exc, httpx2.ConnectTimeout):
                raise OutcomeUnknown(f"HubSpot did not answer within {self.timeout:g} s") from None
            raise ToolError(
                f"HubSpot did not answer within {self.timeout:g} s while trying to {action}. "
                "It may be down or overloaded; try again later."
            ) from None
        except httpx2.ConnectError:
            raise ToolError(
                f"Could not reach HubSpot while trying to {action}; try again later."
            ) from None
        except (httpx2.HTTPError, ValueError) as exc:
            if write:
                raise OutcomeUnknown(f"the answer was unreadable ({type(exc).__name__})") from None
            raise ToolError(
                f"HubSpot gave an answer the bot cannot read while trying to {action}."
            ) from None

    async def _send(
        self, method: str, path: str, json: Any, params: dict[str, str] | None
    ) -> httpx2.Response:
        response = await self.http.request(method, path, json=json, params=params)
        if response.status_code >= 400:
            raise Failed(response)
        return response

    async def close(self) -> None:
        await self.http.aclose()


def message_of(response: httpx2.Response) -> tuple[str, str]:
    """HubSpot's error body: its category (VALIDATION_ERROR, MISSING_SCOPES, ...) and message."""
    try:
        body = response.json()
    except ValueError:
        return "", ""
    if not isinstance(body, dict):
        return "", ""
    return str(body.get("category") or ""), " ".join(str(body.get("message") or "").split())[:300]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, Failed):
        return exc.status in RETRY_STATUSES
    return isinstance(exc, httpx2.ConnectError | httpx2.RemoteProtocolError)


def _write_retryable(exc: BaseException) -> bool:
    """A write is tried again only after a 429 (refused before anything was done) or when
    the connection could not be made."""
    if isinstance(exc, Failed):
        return exc.status == 429
    return isinstance(exc, httpx2.ConnectError)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds to wait before another try: Retry-After, or for a 429 without it HubSpot's
    X-HubSpot-RateLimit-Interval-Milliseconds (the window the limit counts in)."""
    if not isinstance(exc, Failed):
        return None
    headers = exc.response.headers
    try:
        if "Retry-After" in headers:
            return max(0.0, float(headers["Retry-After"]))
        if exc.status == 429 and "X-HubSpot-RateLimit-Interval-Milliseconds" in headers:
            return max(0.0, float(headers["X-HubSpot-RateLimit-Interval-Milliseconds"]) / 1000)
    except ValueError:
        pass
    return None


def _explain(failed: Failed, action: str, write: bool) -> Exception:
    category, message = message_of(failed.response)
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
