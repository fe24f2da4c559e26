"""The connection to Salesforce: the client-credentials token, one requests session for the
process, simple-salesforce's client on it, retries and errors.

The token comes from ``POST {SALESFORCE_LOGIN_URL}/services/oauth2/token``
(``grant_type=client_credentials``) on first use, with the org's ``instance_url``; a 401
``INVALID_SESSION_ID`` fetches it again, once per call. simple-salesforce's client is given
that token and the session (it makes no request of its own to log in). Requests run in the
registry's worker threads; the session's pool keeps the TLS connection open between turns.
Every failure becomes a ``ToolError`` the model can act on (``CredentialsRefused`` for the
secret, ``NotFound`` for a missing record), or ``OutcomeUnknown`` for a write whose answer
was lost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import requests
from simple_salesforce.api import Salesforce
from simple_salesforce.exceptions import (
    SalesforceError,
    SalesforceExpiredSession,
    SalesforceGeneralError,
    SalesforceRefusedRequest,
    SalesforceResourceNotFound,
)
from tenacity import Retrying
from urllib3.exceptions import NewConnectionError

from bot.config import CrmSettings
from bot.errors import ToolError
from bot.tools.crm.base import CredentialsRefused, NotFound, OutcomeUnknown, unreadable
from bot.tools.crm.retry import REQUEST_SHARE, policy

log = logging.getLogger(__name__)

T = TypeVar("T")

#: a read is tried again after these statuses (and REQUEST_LIMIT_EXCEEDED)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
LIMIT_EXCEEDED = "REQUEST_LIMIT_EXCEEDED"
CREDENTIALS = "SALESFORCE_CLIENT_ID and SALESFORCE_CLIENT_SECRET"


class SalesforceConnection:
    """The process's one Salesforce session; ``call`` runs a request with the token renewed
    once and transient failures retried within the time limit."""

    def __init__(self, settings: CrmSettings, time_limit: float) -> None:
        if not (settings.SALESFORCE_LOGIN_URL and settings.SALESFORCE_CLIENT_ID):
            raise ValueError("SALESFORCE_LOGIN_URL and SALESFORCE_CLIENT_ID must be set")
        self.login_url = settings.SALESFORCE_LOGIN_URL
        self.version = settings.SALESFORCE_API_VERSION
        self.time_limit = time_limit
        self.timeout = round(time_limit * REQUEST_SHARE, 2)
        self._credentials = {
            "grant_type": "client_credentials",
            "client_id": settings.SALESFORCE_CLIENT_ID,
            "client_secret": settings.SALESFORCE_CLIENT_SECRET or "",
        }
        self.session = requests.Session()
        #: every request's keywords: its time-out, and the CA bundle (given with each
        #: request: requests lets the environment's REQUESTS_CA_BUNDLE override the session's)
        self.options: dict[str, Any] = {
            "timeout": self.timeout,
            "verify": str(settings.ca_bundle) if settings.ca_bundle else True,
        }
        #: the token's answer: instance_url, and the identity URL (id) naming the org
        self.identity: dict[str, Any] = {}
        self._client: Salesforce | None = None
        self._lock = threading.Lock()

    @property
    def instance_url(self) -> str:
        return str(self.identity.get("instance_url", "")).rstrip("/")

    def record_url(self, sobject: str, record_id: str) -> str:
        """The record's page in Lightning Experience."""
        return f"{self.instance_url}/lightning/r/{sobject}/{record_id}/view"

    def client(self) -> Salesforce:
        with self._lock:
            if self._client is None:
                self._client = self._login()
            return self._client

    def _renew(self, stale: Salesforce) -> None:
        with self._lock:
            if self._client is stale:  # another thread may have renewed it already
                log.info("salesforce: the session expired; fetching a new token")
                self._client = self._login()

    def _login(self) -> Salesforce:
        url = f"{self.login_url}/services/oauth2/token"
        try:
            response = self.session.post(url, data=self._credentials, **self.options)
        except requests.Timeout:
            raise ToolError(
                f"Salesforce did not answer within {self.timeout:g} s at SALESFORCE_LOGIN_URL."
            ) from None
        except requests.RequestException as exc:
            raise ToolError(
                f"Could not reach Salesforce at SALESFORCE_LOGIN_URL ({type(exc).__name__})."
            ) from None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ToolError(
                f"Salesforce's token endpoint answered HTTP {response.status_code} with "
                "something that is not JSON; check SALESFORCE_LOGIN_URL (the org's My Domain)."
            )
        if response.status_code != 200 or "access_token" not in answer:
            reason = f"{answer.get('error')}: {answer.get('error_description')}"
            raise CredentialsRefused(
                f"Salesforce refused the bot's client credentials ({reason}). An admin must "
                f"check {CREDENTIALS} and that the app's client-credentials flow has a run-as "
                "user; retrying will not help."
            )
        self.identity = answer
        return Salesforce(
            instance_url=answer["instance_url"],
            session_id=answer["access_token"],
            session=self.session,
            version=self.version,
        )

    def call(self, request: Callable[[Salesforce], T], *, action: str, write: bool = False) -> T:
        """``request(client)``, within the time limit from now; its failures explained."""
        until = time.monotonic() + self.time_limit
        retrying = Retrying(
            **policy(until, _write_retryable if write else _retryable, _no_wait, "salesforce")
        )
        try:
            return cast(T, retrying(self._renewing, request))
        except SalesforceError as exc:
            raise _explain(exc, action, write) from None
        except requests.Timeout as exc:
            if write and not isinstance(exc, requests.ConnectTimeout):
                raise OutcomeUnknown(
                    f"Salesforce did not answer within {self.timeout:g} s"
                ) from None
            raise ToolError(
                f"Salesforce did not answer within {self.timeout:g} s while trying to {action}. "
                "It may be down or overloaded; try again later."
            ) from None
        except requests.ConnectionError as exc:
            if write and not _never_sent(exc):
                raise OutcomeUnknown("the connection to Salesforce broke") from None
            raise ToolError(
                f"Could not reach Salesforce while trying to {action}; try again later."
            ) from None
        except (requests.RequestException, ValueError) as exc:
            raise unreadable("Salesforce", action, exc, write) from None

    def _renewing(self, request: Callable[[Salesforce], T]) -> T:
        client = self.client()
        try:
            return request(client)
        except SalesforceExpiredSession:
            self._renew(client)
            return request(self.client())


def errors_of(exc: SalesforceError) -> list[dict[str, Any]]:
    """Salesforce's error body: a JSON array of ``message`` and ``errorCode`` (which
    simple-salesforce keeps parsed, or as text when it is not JSON)."""
    body: Any = exc.content
    if isinstance(body, str | bytes):
        try:
            body = json.loads(body)
        except ValueError:
            return []
    return [e for e in body if isinstance(e, dict)] if isinstance(body, list) else []


def _code(exc: SalesforceError) -> str:
    return next((str(e.get("errorCode")) for e in errors_of(exc)), "")


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, SalesforceRefusedRequest):
        return _code(exc) == LIMIT_EXCEEDED
    if isinstance(exc, SalesforceGeneralError):
        return exc.status in RETRY_STATUSES
    return isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.Timeout)


def _write_retryable(exc: BaseException) -> bool:
    """A write is tried again only when Salesforce refused it before doing anything."""
    if isinstance(exc, SalesforceRefusedRequest):
        return _code(exc) == LIMIT_EXCEEDED
    return isinstance(exc, requests.ConnectionError) and _never_sent(exc)


def _no_wait(exc: BaseException) -> float | None:
    return None  # Salesforce sends no Retry-After: the backoff decides


def _explain(exc: SalesforceError, action: str, write: bool) -> Exception:
    errors = errors_of(exc)
    code = next((str(e.get("errorCode")) for e in errors), "")
    message = " ".join(str(e.get("message", "")) for e in errors)[:300]
    detail = f": {message} ({code})" if message else "."
    if isinstance(exc, SalesforceExpiredSession):
        return CredentialsRefused(
            "Salesforce refused the bot's session even with a new token (INVALID_SESSION_ID). "
            f"An admin must check {CREDENTIALS}."
        )
    if isinstance(exc, SalesforceResourceNotFound):
        return NotFound(f"Salesforce has no such record (trying to {action}){detail}")
    if code == LIMIT_EXCEEDED:
        return ToolError(
            f"Salesforce's API request limit is exceeded (REQUEST_LIMIT_EXCEEDED) while trying "
            f"to {action}. Try again later."
        )
    if isinstance(exc, SalesforceRefusedRequest):
        return ToolError(f"Salesforce denied permission to {action} (HTTP 403){detail}")
    if write and exc.status >= 500:
        return OutcomeUnknown(f"Salesforce answered HTTP {exc.status}")
    if exc.status >= 500:
        return ToolError(
            f"Salesforce failed with HTTP {exc.status} while trying to {action}. Try again later."
        )
    return ToolError(f"Salesforce rejected the request to {action} (HTTP {exc.status}){detail}")


def _never_sent(exc: requests.ConnectionError) -> bool:
    """True when the connection was never made (refused, DNS): nothing reached Salesforce."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, NewConnectionError)
