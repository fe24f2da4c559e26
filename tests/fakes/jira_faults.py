"""The trouble a test scripts for the fake Jira: the next matching requests fail, lose their
connection, or hang."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, Response

from tests.fakes.jira_answers import NOT_FOUND, error


@dataclass
class Fault:
    """Trouble scripted for the next requests matching ``pattern`` (and ``method``)."""

    kind: str  # "fail" | "reset" | "hang"
    pattern: re.Pattern[str]
    method: str | None
    times: int
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    seconds: float = 0.0
    before: bool = False
    after: bool = False

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method:
            return False
        return bool(self.pattern.search(path))


class FaultMethods:
    """Mixed into FakeJira: the faults scripted, under its lock."""

    _lock: threading.Lock
    _faults: list[Fault]

    def fail_next(
        self,
        path_regex: str,
        status: int,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        *,
        method: str | None = None,
    ) -> None:
        """Answer the next matching request(s) with ``status`` (a Jira-shaped body by default)."""
        self._add(
            Fault("fail", re.compile(path_regex), method, times, status, dict(headers or {}), body)
        )

    def reset_connection_next(
        self,
        path_regex: str,
        times: int = 1,
        *,
        method: str | None = None,
        before: bool = False,
    ) -> None:
        """Drop the connection of the next matching request(s) without an answer: after
        handling it (a create is stored) or, with ``before=True``, instead of handling it."""
        self._add(Fault("reset", re.compile(path_regex), method, times, before=before))

    def hang_next(
        self,
        seconds: float,
        path_regex: str = ".*",
        times: int = 1,
        *,
        method: str | None = None,
        after: bool = False,
    ) -> None:
        """Wait ``seconds`` before handling the next matching request(s); ``after=True``:
        handle it first (a create is stored), then wait before answering."""
        self._add(
            Fault("hang", re.compile(path_regex), method, times, seconds=seconds, after=after)
        )

    def _add(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None


_DEFAULT_FAULT_MESSAGES = {
    400: "Bad request.",
    401: "You are not authenticated. Authentication required to perform this operation.",
    403: "You do not have permission to perform this operation.",
    404: NOT_FOUND,
    429: "Rate limit exceeded.",
    500: "Internal server error.",
    502: "Bad gateway.",
    503: "Service Unavailable.",
    504: "Gateway timeout.",
}


def fault_response(fault: Fault) -> Response:
    """What a ``fail`` fault answers: its body, or a Jira-shaped one for its status."""
    if fault.body is None:
        message = _DEFAULT_FAULT_MESSAGES.get(fault.status, f"HTTP {fault.status}")
        response: Response = error(fault.status, [message])
    elif isinstance(fault.body, str | bytes):
        response = Response(fault.body, status_code=fault.status, media_type="text/plain")
    else:
        response = JSONResponse(fault.body, status_code=fault.status)
    response.headers.update(fault.headers)
    return response
