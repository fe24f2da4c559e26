"""The connection to Jira: auth, the ``jira`` client, its retries and its errors.

The ``jira`` client is synchronous; the registry runs the tools in a worker thread. Every
failure becomes a ``ToolError`` whose text the model can act on, and no Jira call can
outlive the tool's time limit:

* the client is created on first use (``get_server_info=False``), so the bot starts while
  Jira is down;
* every request has an explicit timeout (the library's default is to wait forever);
* the library's own retries are off (``max_retries=0``: they sleep up to a minute and
  re-POST after a connection error). Instead urllib3's ``Retry`` is mounted on its
  session (``JiraRetry``): reads are retried on 429/502/503/504 and a dropped connection,
  honouring Retry-After, only while the wait leaves time within the call's deadline; a
  create (POST) is retried only after a 429, which Jira rejects before processing it;
* a create whose outcome is unclear (connection dropped, time-out, 5xx) raises
  ``OutcomeUnknown`` for create.py to look the issue up by its marker label.

Jira Cloud or Server/Data Center: Cloud when the host is ``*.atlassian.net`` or when
JIRA_EMAIL + JIRA_API_TOKEN (basic auth) are used; otherwise Server (JIRA_PAT, bearer).
Cloud searches go to ``/rest/api/2/search/jql``; Server to ``/rest/api/2/search``. A 404
from the new endpoint or a 410 from the old one switches to the other, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit

import requests
from jira import JIRA, JIRAError
from requests.adapters import HTTPAdapter
from urllib3.exceptions import (
    InvalidHeader,
    MaxRetryError,
    NewConnectionError,
    ReadTimeoutError,
    ResponseError,
)
from urllib3.util.retry import Retry

from bot.config import JiraSettings
from bot.errors import ToolError
from bot.tools.jira.errors import OutcomeUnknown, explain

if TYPE_CHECKING:
    from types import TracebackType

    from urllib3.connectionpool import ConnectionPool
    from urllib3.response import BaseHTTPResponse

log = logging.getLogger(__name__)

T = TypeVar("T")

#: statuses after which a read is retried (a create only after 429)
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: retries after the first attempt
RETRIES = 2
#: a retry is only made when at least this much time is left for the request itself
MIN_REQUEST_S = 1.0

#: when the current tool call must be done by (time.monotonic); set by ``deadline()``
_DEADLINE: ContextVar[float | None] = ContextVar("jira_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Bound the retries of the Jira requests made inside to ``seconds`` from now."""
    until = time.monotonic() + seconds
    token = _DEADLINE.set(until)
    try:
        yield until
    finally:
        _DEADLINE.reset(token)


class JiraRetry(Retry):
    """urllib3's Retry with the bot's rules: POST only after a 429, no retry of a request
    that timed out (the time limit is spent), and none whose wait would pass the deadline
    (then the last answer is returned, and explained)."""

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if method.upper() == "POST":
            return status_code == 429 and bool(self.total)
        return super().is_retry(method, status_code, has_retry_after)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        if isinstance(error, ReadTimeoutError):
            raise error.with_traceback(_stacktrace)
        retry = super().increment(method, url, response, error, _pool, _stacktrace)
        until = _DEADLINE.get()
        wait = _retry_after(retry, response) if response is not None else None
        if wait is None:
            wait = retry.get_backoff_time()
        if until is not None and time.monotonic() + wait + MIN_REQUEST_S > until:
            # as when the retries are used up: the pool returns the last answer
            # (raise_on_status=False), or requests raises the error
            reason = error or ResponseError("no time left to retry within the time limit")
            raise MaxRetryError(_pool, url, reason) from error  # type: ignore[arg-type]  # as in urllib3's own increment: a pool always passes itself
        if response is not None:
            log.info("jira: HTTP %s, retrying in %.1f s", response.status, wait)
        return retry


def _retry_after(retry: Retry, response: Any) -> float | None:
    try:
        return retry.get_retry_after(response) if retry.respect_retry_after_header else None
    except InvalidHeader:
        return None


def retry_after(response: requests.Response | None) -> float | None:
    """Retry-After of a response, in seconds (urllib3 reads it); None when absent."""
    value = response.headers.get("Retry-After") if response is not None else None
    if not value:
        return None
    try:
        return Retry(0).parse_retry_after(value)
    except InvalidHeader:
        return None


class JiraConnection:
    """The Jira client of JiraTools: created on first use, its requests retried within the
    deadline, its failures explained.

    ``time_limit`` (TOOL_TIMEOUT_S) bounds the whole call, retries included; ``timeout`` is
    one HTTP request's time-out (default: 80% of it, so the tool answers "Jira did not
    answer" before the registry's own limit).
    """

    def __init__(
        self, settings: JiraSettings, time_limit: float, *, timeout: float | None = None
    ) -> None:
        if not settings.JIRA_URL:
            raise ValueError("JIRA_URL is not set")
        self.settings = settings
        self.base_url = settings.JIRA_URL.rstrip("/")
        self.time_limit = time_limit
        self.request_timeout = timeout or round(self.time_limit * 0.8, 2)
        host = (urlsplit(self.base_url).hostname or "").lower()
        cloud_host = host.endswith((".atlassian.net", ".jira.com"))
        has_basic = bool(settings.JIRA_EMAIL and settings.JIRA_API_TOKEN)
        self._use_basic = has_basic and (cloud_host or not settings.JIRA_PAT)
        self._use_pat = bool(settings.JIRA_PAT) and not self._use_basic
        #: Cloud decides the search endpoint; corrected once if Jira says otherwise
        self.cloud = cloud_host or self._use_basic
        self._search_switched = False
        self._client: JIRA | None = None
        self._lock = threading.Lock()

    def issue_url(self, key: str) -> str:
        return f"{self.base_url}/browse/{key}"

    def client(self) -> JIRA:
        """The client, created on first use: constructing it makes no request."""
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _new_client(self) -> JIRA:
        auth: dict[str, Any] = {}
        if self._use_basic:
            auth["basic_auth"] = (self.settings.JIRA_EMAIL, self.settings.JIRA_API_TOKEN)
        elif self._use_pat:
            auth["token_auth"] = self.settings.JIRA_PAT
        try:
            client = JIRA(
                server=self.base_url,
                get_server_info=False,
                max_retries=0,
                timeout=self.request_timeout,
                **auth,
            )
        except Exception as exc:
            raise ToolError(
                f"The Jira client could not be set up ({type(exc).__name__}); check JIRA_URL."
            ) from None
        retry = JiraRetry(
            total=RETRIES,
            connect=0,  # nothing reached Jira: say so at once rather than wait
            other=0,
            status_forcelist=RETRY_STATUSES,
            backoff_factor=1.0,
            respect_retry_after_header=True,
            raise_on_status=False,  # the last answer is explained below
        )
        adapter = HTTPAdapter(max_retries=retry)
        # the library exposes its requests session only as _session
        for prefix in ("https://", "http://"):
            client._session.mount(prefix, adapter)
        # what search_issues() looks at to pick /search/jql (Cloud) or /search
        client.deploymentType = "Cloud" if self.cloud else None
        return client

    def search(self, jql: str, limit: int, fields: list[str]) -> dict[str, Any]:
        client = self.client()

        def search() -> dict[str, Any]:
            try:
                return client.search_issues(
                    jql, maxResults=limit, fields=list(fields), json_result=True
                )
            except JIRAError as exc:
                if not self._switch_search_api(client, exc.status_code):
                    raise
                return client.search_issues(
                    jql, maxResults=limit, fields=list(fields), json_result=True
                )

        return self.call(search, action="search", bad_request="search")

    def _switch_search_api(self, client: JIRA, status: int | None) -> bool:
        """A 404 from /search/jql means Server; a 410 from /search means Cloud. Once."""
        if self._search_switched:
            return False
        if (status == 404 and self.cloud) or (status == 410 and not self.cloud):
            self._search_switched = True
            self.cloud = not self.cloud
            client.deploymentType = "Cloud" if self.cloud else None
            log.warning("jira: switching to the %s search API", "Cloud" if self.cloud else "Server")
            return True
        return False

    def rest(
        self,
        method: str,
        path: str,
        *,
        api: int = 2,
        params: dict[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        """One request to ``/rest/api/{api}/{path}`` through the client's session (its auth
        and JiraRetry): the answer's JSON, None when it has no body. Raises what the client
        raises; run it inside ``call``."""
        session = self.client()._session  # the library's requests session, as in _new_client
        response = session.request(
            method,
            f"{self.base_url}/rest/api/{api}/{path}",
            params=params,
            data=json.dumps(body) if body is not None else None,
        )
        return response.json() if response.content else None

    async def blocking(self, work: Callable[[], T]) -> T:
        """``work`` (blocking client calls) in a worker thread, its retries held to the
        tool's time limit: for the tools that are coroutines."""

        def bounded() -> T:
            with deadline(self.time_limit):
                return work()

        return await asyncio.to_thread(bounded)

    def call(
        self,
        request: Callable[[], T],
        *,
        action: str,
        write: bool = False,
        bad_request: str = "issue",
        not_done: str = "The issue was not created.",
    ) -> T:
        """Run one client call (JiraRetry retries it); every failure becomes a ToolError
        (or NotFound / OutcomeUnknown for the caller to word). ``not_done`` is what a
        write's error says of it when Jira surely did not do it."""
        not_created = f" {not_done}" if write else ""
        try:
            return request()
        except JIRAError as exc:
            if write and exc.status_code is not None and exc.status_code >= 500:
                raise OutcomeUnknown(f"Jira answered HTTP {exc.status_code}") from None
            raise explain(exc, action, bad_request, retry_after(exc.response)) from None
        except requests.Timeout as exc:
            if write and not isinstance(exc, requests.ConnectTimeout):
                raise OutcomeUnknown(
                    f"Jira did not answer within {self.request_timeout:g} s"
                ) from None
            raise ToolError(
                f"Jira did not answer within {self.request_timeout:g} s. It may be down or "
                f"overloaded.{not_created} Try again later."
            ) from None
        except requests.ConnectionError as exc:
            if _never_sent(exc):
                raise ToolError(
                    "Could not connect to Jira (it may be down or unreachable)."
                    f"{not_created} Try again later."
                ) from None
            if write:
                raise OutcomeUnknown("the connection to Jira broke") from None
            raise ToolError(
                "The connection to Jira broke before it answered. Try again later."
            ) from None
        except requests.RequestException as exc:
            if write:
                raise OutcomeUnknown(f"the answer was unreadable ({type(exc).__name__})") from None
            raise ToolError(
                f"The request to Jira failed ({type(exc).__name__}). Try again later."
            ) from None
        except ValueError:  # a 200 that is not JSON: a proxy or login page
            if write:
                raise OutcomeUnknown("Jira's answer was not JSON") from None
            raise ToolError(
                "Jira answered with something that is not JSON; check JIRA_URL."
            ) from None


def _never_sent(exc: requests.ConnectionError) -> bool:
    """True when the connection was never made (refused, DNS): nothing reached Jira."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, NewConnectionError)
