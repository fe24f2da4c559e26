"""Jira's failures in words the model can act on; never a token or a stack trace."""

from __future__ import annotations

from typing import Any

import requests
from jira import JIRAError

from bot.errors import ToolError

TRUNCATED = "… [truncated]"


class NotFound(ToolError):
    """Jira answered 404; the caller may word it better."""


class OutcomeUnknown(Exception):
    """A write was sent but its answer was lost; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def explain(exc: JIRAError, action: str, bad_request: str, wait: float | None) -> ToolError:
    """The ToolError for Jira's answer ``exc`` to ``action``; ``wait`` is its Retry-After."""
    status = exc.status_code
    detail = error_detail(exc.response)
    suffix = f": {detail}" if detail else "."
    if status == 401:
        return ToolError(
            "Jira authentication failed (HTTP 401): the configured Jira credentials "
            "(JIRA_EMAIL and JIRA_API_TOKEN, or JIRA_PAT) were refused. An admin must fix "
            "them; retrying will not help."
        )
    if status == 403:
        return ToolError(f"Jira denied permission to {action} (HTTP 403){suffix}")
    if status == 404:
        return NotFound(f"Jira answered 404 (not found) while trying to {action}.")
    if status == 400:
        return ToolError(f"Jira rejected the {bad_request}{suffix}")
    if status == 429:
        when = f"in {wait:.0f} s" if wait is not None else "in a minute"
        return ToolError(f"Jira is rate limiting, try again {when}.")
    if status is not None and status >= 500:
        return ToolError(
            f"Jira failed with HTTP {status} while trying to {action}. Try again later."
        )
    if status is None:
        return ToolError(f"Jira gave an unexpected answer while trying to {action}.")
    return ToolError(f"Jira answered HTTP {status} while trying to {action}{suffix}")


def error_detail(response: requests.Response | None, limit: int = 1_000) -> str:
    """Jira's errorMessages and field errors as one line: 'components: X is required.'"""
    if response is None:
        return ""
    denied = response.headers.get("X-Authentication-Denied-Reason")
    if denied:
        return trim(f"login denied ({denied})", limit) or ""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    parts = [str(m) for m in body.get("errorMessages") or [] if m]
    errors = body.get("errors")
    if isinstance(errors, dict):
        parts += [f"{field}: {message}" for field, message in errors.items()]
    for key in ("message", "errorMessage"):
        if not parts and isinstance(body.get(key), str):
            parts.append(body[key])
    text = " ".join(trim(" ".join(p.split()), 300) or "" for p in parts)
    return trim(text, limit) or ""


def trim(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    text = str(value)
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED)] + TRUNCATED
