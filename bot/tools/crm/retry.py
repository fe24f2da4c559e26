"""The CRM clients' retries and TLS, shared by Salesforce's and HubSpot's.

A request that failed in a way worth another try (the backend's ``retryable`` says which:
a 5xx or a rate limit for a read, only a rejection sent before any processing for a write)
is tried again by tenacity, at most ``RETRIES`` more times, after the CRM's Retry-After or
an exponential backoff, and only while the wait leaves ``MIN_REQUEST_S`` for the request
within the tool call's time limit (``until``); otherwise the last failure is raised for the
backend to explain.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenacity import (
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    wait_exponential,
)
from tenacity.stop import stop_base

log = logging.getLogger(__name__)

#: tries after the first
RETRIES = 2
#: a retry is only made when at least this much time is left for the request itself
MIN_REQUEST_S = 1.0
#: one HTTP request's time-out, as a share of the tool's time limit: the tool answers "did
#: not answer" before the registry's own limit cuts it off
REQUEST_SHARE = 0.8

_BACKOFF = wait_exponential(multiplier=0.5, max=4)


def policy(
    until: float,
    retryable: Callable[[BaseException], bool],
    retry_after: Callable[[BaseException], float | None],
    crm: str,
) -> dict[str, Any]:
    """tenacity's arguments (``Retrying(**policy(...))``, or ``AsyncRetrying``) for the
    requests of one tool call that must be done by ``until`` (time.monotonic)."""

    def wait(state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        after = retry_after(failure) if failure is not None else None
        return after if after is not None else _BACKOFF(state)

    def before_sleep(state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome else None
        log.info("%s: %s, retrying in %.1f s", crm, _short(failure), state.upcoming_sleep)

    return {
        "retry": retry_if_exception(retryable),
        "wait": wait,
        "stop": stop_any(stop_after_attempt(RETRIES + 1), StopBeforeDeadline(until)),
        "before_sleep": before_sleep,
        "reraise": True,
    }


class StopBeforeDeadline(stop_base):
    """Stop when the next wait would leave less than MIN_REQUEST_S before ``until``."""

    def __init__(self, until: float) -> None:
        self.until = until

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() + retry_state.upcoming_sleep + MIN_REQUEST_S > self.until


def tls_context(ca_bundle: Path | None) -> ssl.SSLContext | None:
    """A verifying context that trusts ``ca_bundle`` (SSL_CERT_FILE or REQUESTS_CA_BUNDLE)
    instead of the default CAs; None without one (each client's own default, verified)."""
    if ca_bundle is None:
        return None
    return ssl.create_default_context(cafile=str(ca_bundle))


def _short(failure: BaseException | None) -> str:
    status = getattr(failure, "status", None) or getattr(
        getattr(failure, "response", None), "status_code", None
    )
    return f"HTTP {status}" if status else type(failure).__name__
