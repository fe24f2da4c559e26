"""Jira tools: read an issue, search with JQL, create an issue in an allowed project.

The ``jira`` client is synchronous; the registry runs these methods in a worker thread.
Every failure becomes a ``ToolError`` whose text the model can act on, and no Jira call can
outlive the tool's time limit:

* the client is created on first use (``get_server_info=False``), so the bot starts while
  Jira is down;
* every request has an explicit timeout (the library's default is to wait forever);
* the library's own retries are off (``max_retries=0``: they sleep up to a minute and re-POST
  after a connection error); reads are retried here, on 429/502/503/504 and a dropped
  connection, only while the wait fits in the time limit;
* a create is never sent twice after an unclear outcome (connection dropped, time-out, 5xx):
  each new issue carries a unique ``bot-...`` label, and Jira is searched for that label to
  find out whether the issue exists. Only a 429 (rejected before processing) is retried.

Jira Cloud or Server/Data Center: Cloud when the host is ``*.atlassian.net`` or when
JIRA_EMAIL + JIRA_API_TOKEN (basic auth) are used; otherwise Server (JIRA_PAT, bearer). Cloud
searches go to ``/rest/api/2/search/jql``; Server to ``/rest/api/2/search``. A 404 from the
new endpoint or a 410 from the old one switches to the other, once.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests
from jira import JIRA, JIRAError
from urllib3.exceptions import NewConnectionError

from bot.config import Settings
from bot.errors import ToolError
from bot.tools.base import tool

log = logging.getLogger(__name__)

T = TypeVar("T")

DESCRIPTION_LIMIT = 2_000
SUMMARY_LIMIT = 300
NAME_LIMIT = 100
MAX_SEARCH_RESULTS = 20
#: Jira's own limit on a summary
JIRA_SUMMARY_MAX = 255
#: a description longer than this is refused rather than sent (Jira's limit is 32,767)
CREATE_DESCRIPTION_MAX = 30_000
TRUNCATED = "… [truncated]"

ISSUE_KEY = re.compile(r"^[A-Z][A-Z0-9_]*-[1-9][0-9]*$")
_ISSUE_FIELDS = [
    "summary",
    "status",
    "issuetype",
    "priority",
    "assignee",
    "reporter",
    "created",
    "updated",
    "description",
]
_SEARCH_FIELDS = ["summary", "status", "assignee"]
#: statuses after which a read is retried (a create only after 429)
_RETRY_STATUSES = {429, 502, 503, 504}
_MAX_ATTEMPTS = 3
#: a retry is only made when at least this much time is left for the request itself
_MIN_REQUEST_S = 1.0


class _NotFound(ToolError):
    """Jira answered 404; the caller may word it better."""


class _OutcomeUnknown(Exception):
    """A write was sent but its answer was lost; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class JiraTools:
    """The Jira tools; register with ``ToolRegistry.add_object(JiraTools(settings))``.

    ``timeout`` is one HTTP request's time-out (default: 80% of TOOL_TIMEOUT_S, so the tool
    answers "Jira did not answer" before the registry's own limit). TOOL_TIMEOUT_S bounds the
    whole call, retries included.
    """

    def __init__(self, settings: Settings, *, timeout: float | None = None) -> None:
        if not settings.JIRA_URL:
            raise ValueError("JIRA_URL is not set")
        self.settings = settings
        self.base_url = settings.JIRA_URL.rstrip("/")
        self.time_limit = settings.TOOL_TIMEOUT_S
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

    # ---- tools

    @tool(progress="Looking up {issue_key} in Jira")
    def jira_get_issue(self, issue_key: str) -> dict[str, Any]:
        """Read one Jira issue: summary, status, type, priority, people, dates, description.

        Use it whenever the user mentions an issue key; never describe an issue you have not
        read. Descriptions longer than 2,000 characters are cut.

        Args:
            issue_key: the issue key, e.g. "TASK-123".
        """
        key = _issue_key(issue_key)
        deadline = self._deadline()
        client = self._jira()
        try:
            issue = self._call(
                lambda: client.issue(key, fields=",".join(_ISSUE_FIELDS)),
                deadline=deadline,
                action=f"read {key}",
                bad_request="request",
            )
        except _NotFound:
            raise ToolError(
                f"Issue {key} does not exist or you do not have permission to see it."
            ) from None
        raw = issue.raw or {}
        fields = raw.get("fields") or {}
        real_key = raw.get("key") or key
        return {
            "key": real_key,
            "summary": _trim(fields.get("summary"), SUMMARY_LIMIT),
            "status": _name(fields.get("status")),
            "issue_type": _name(fields.get("issuetype")),
            "priority": _name(fields.get("priority")),
            "assignee": _person(fields.get("assignee")),
            "reporter": _person(fields.get("reporter")),
            "created": fields.get("created"),
            "updated": fields.get("updated"),
            "description": _trim(_text(fields.get("description")), DESCRIPTION_LIMIT),
            "url": self.issue_url(real_key),
        }

    @tool(progress="Searching Jira: {jql}")
    def jira_search_issues(self, jql: str, max_results: int = 10) -> dict[str, Any]:
        """Search Jira issues with a JQL query; returns key, summary, status, assignee and url.

        Examples: 'project = TASK AND status = "In Progress" ORDER BY updated DESC',
        'text ~ "login error" ORDER BY created DESC'.

        Args:
            jql: the JQL query.
            max_results: how many issues to return, 1 to 20 (default 10).
        """
        if not jql.strip():
            raise ToolError("The JQL query is empty. Give a query such as 'project = TASK'.")
        limit = max(1, min(max_results, MAX_SEARCH_RESULTS))
        data = self._search(jql, limit, _SEARCH_FIELDS, self._deadline())
        issues = [
            {
                "key": item.get("key"),
                "summary": _trim((item.get("fields") or {}).get("summary"), SUMMARY_LIMIT),
                "status": _name((item.get("fields") or {}).get("status")),
                "assignee": _person((item.get("fields") or {}).get("assignee")),
                "url": self.issue_url(item.get("key") or ""),
            }
            for item in (data.get("issues") or [])[:limit]
        ]
        if "total" in data:
            more = int(data.get("total") or 0) > len(issues)
        else:
            more = bool(data.get("nextPageToken")) or data.get("isLast") is False
        return {"issues": issues, "count": len(issues), "more": more}

    @tool(writes=True, progress="Creating a Jira ticket: {summary}", lookup="find_created_issue")
    def jira_create_issue(
        self,
        summary: str,
        description: str,
        project_key: str | None = None,
        issue_type: str = "Task",
        priority: str | None = None,
        labels: list[str] | None = None,
        *,
        marker: str | None = None,
    ) -> dict[str, Any]:
        """Create a Jira issue and return its key and url. Only in the allowed projects.

        Only call this when the user asked for a ticket. For a ticket about a CRM contact,
        name the contact and their account (company) in the summary or description.

        Args:
            summary: one line, at most 255 characters.
            description: the details, in plain text.
            project_key: the project, e.g. "TASK"; the configured default project when omitted.
            issue_type: "Task" (default), "Bug", "Story", ...
            priority: e.g. "High", "Medium", "Low"; Jira's default when omitted.
            labels: labels without spaces.
        """
        project = self._allowed_project(project_key)
        summary = " ".join(summary.split())
        if not summary:
            raise ToolError("The summary is empty; give a one-line summary.")
        if len(summary) > JIRA_SUMMARY_MAX:
            raise ToolError(
                f"The summary has {len(summary)} characters; Jira allows {JIRA_SUMMARY_MAX}. "
                "Shorten it and put the details in the description."
            )
        if len(description) > CREATE_DESCRIPTION_MAX:
            raise ToolError(
                f"The description has {len(description)} characters; keep it under "
                f"{CREATE_DESCRIPTION_MAX}."
            )
        marker = marker or f"bot-{secrets.token_hex(5)}"
        all_labels = [_label(x) for x in labels or [] if x.strip()]
        all_labels = list(dict.fromkeys([*all_labels, marker]))
        fields: dict[str, Any] = {
            "project": {"key": project},
            "issuetype": {"name": issue_type.strip() or "Task"},
            "summary": summary,
            "description": description,
            "labels": all_labels,
        }
        if priority and priority.strip():
            fields["priority"] = {"name": priority.strip()}

        deadline = self._deadline()
        client = self._jira()
        try:
            issue = self._call(
                lambda: client.create_issue(fields=fields, prefetch=False),
                deadline=deadline,
                action=f"create an issue in {project}",
                write=True,
            )
        except _OutcomeUnknown as unknown:
            return self._recover_create(project, marker, unknown.reason, deadline)
        key = (issue.raw or {}).get("key") or issue.key
        log.info("jira: created %s", key)
        return {"key": key, "url": self.issue_url(key)}

    # ---- helpers

    def issue_url(self, key: str) -> str:
        return f"{self.base_url}/browse/{key}"

    def _deadline(self) -> float:
        return time.monotonic() + self.time_limit

    def _jira(self) -> JIRA:
        """The client, created on first use: constructing it makes no request."""
        with self._lock:
            if self._client is None:
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
                        f"The Jira client could not be set up ({type(exc).__name__}); "
                        "check JIRA_URL."
                    ) from None
                # what search_issues() looks at to pick /search/jql (Cloud) or /search
                client.deploymentType = "Cloud" if self.cloud else None
                self._client = client
            return self._client

    def _allowed_project(self, project_key: str | None) -> str:
        allowed = self.settings.allowed_projects
        if not allowed:
            raise ToolError(
                "Creating Jira issues is disabled: no project is allowed. An admin can set "
                "JIRA_PROJECT or JIRA_ALLOWED_PROJECTS."
            )
        project = (project_key or self.settings.JIRA_PROJECT or "").strip().upper()
        if not project:
            if len(allowed) == 1:
                return allowed[0]
            raise ToolError(f"Say which project to use: one of {', '.join(allowed)}.")
        if project not in allowed:
            raise ToolError(
                f"Creating issues in project {project[:30]} is not allowed. "
                f"Allowed projects: {', '.join(allowed)}."
            )
        return project

    def _search(self, jql: str, limit: int, fields: list[str], deadline: float) -> dict[str, Any]:
        client = self._jira()

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

        return self._call(search, deadline=deadline, action="search", bad_request="search")

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

    def find_created_issue(
        self, marker: str, project_key: str | None = None, **_: Any
    ) -> dict[str, Any]:
        """The lookup of ``jira_create_issue`` for a turn resumed after a crash: the issue a
        create with ``marker`` made, found by its label; never creates one."""
        project = self._allowed_project(project_key)
        return self._recover_create(project, marker, "the bot restarted", self._deadline())

    def _recover_create(
        self, project: str, marker: str, reason: str, deadline: float
    ) -> dict[str, Any]:
        """The create's answer was lost: find out, by its marker label, whether it exists."""
        log.warning("jira: create in %s: %s; looking for label %s", project, reason, marker)
        jql = f'project = "{project}" AND labels = "{marker}"'
        checked = False
        for pause in (0.0, 1.0, 2.0):  # a new issue can take a moment to be searchable
            if pause:
                if time.monotonic() + pause + _MIN_REQUEST_S > deadline:
                    break
                time.sleep(pause)
            try:
                data = self._search(jql, 1, ["summary"], deadline)
            except ToolError:
                continue
            checked = True
            found = data.get("issues") or []
            if found:
                key = found[0].get("key")
                return {
                    "key": key,
                    "url": self.issue_url(key),
                    "note": f"Jira's answer was lost ({reason}), but a search shows the "
                    "issue was created. It was not sent again.",
                }
        if checked:
            raise ToolError(
                f"Creating the issue in {project} failed ({reason}) and a search for it "
                f"(labels = {marker}) finds nothing, so it was most likely not created. It was "
                "not sent again automatically; to be sure, search for that label before "
                "trying again."
            )
        raise ToolError(
            f"Creating the issue in {project} failed ({reason}) and Jira could not be searched "
            f"to check whether it exists. It was not sent again, to avoid a duplicate: search "
            f"for 'labels = {marker}' later before trying again."
        )

    def _call(
        self,
        request: Callable[[], T],
        *,
        deadline: float,
        action: str,
        write: bool = False,
        bad_request: str = "issue",
    ) -> T:
        """Run one client call with bounded retries; every failure becomes a ToolError
        (or _NotFound / _OutcomeUnknown for the caller to word)."""
        attempt = 1
        while True:
            try:
                return request()
            except JIRAError as exc:
                status = exc.status_code
                retryable = status == 429 or (not write and status in _RETRY_STATUSES)
                wait = _retry_after(exc.response)
                if wait is None:
                    wait = float(2 ** (attempt - 1))
                if (
                    retryable
                    and attempt < _MAX_ATTEMPTS
                    and time.monotonic() + wait + _MIN_REQUEST_S <= deadline
                ):
                    log.info("jira: HTTP %s on %s, retrying in %.1f s", status, action, wait)
                    time.sleep(wait)
                    attempt += 1
                    continue
                if write and status is not None and status >= 500:
                    raise _OutcomeUnknown(f"Jira answered HTTP {status}") from None
                raise self._explain(exc, action, bad_request) from None
            except requests.Timeout as exc:
                sent = not isinstance(exc, requests.ConnectTimeout)
                if write and sent:
                    raise _OutcomeUnknown(
                        f"Jira did not answer within {self.request_timeout:g} s"
                    ) from None
                not_created = " The issue was not created." if write else ""
                raise ToolError(
                    f"Jira did not answer within {self.request_timeout:g} s. It may be down or "
                    f"overloaded.{not_created} Try again later."
                ) from None
            except requests.ConnectionError as exc:
                if _never_sent(exc):
                    not_created = " The issue was not created." if write else ""
                    raise ToolError(
                        "Could not connect to Jira (it may be down or unreachable)."
                        f"{not_created} Try again later."
                    ) from None
                if write:
                    raise _OutcomeUnknown("the connection to Jira broke") from None
                if attempt < _MAX_ATTEMPTS and time.monotonic() + _MIN_REQUEST_S * 2 <= deadline:
                    attempt += 1
                    time.sleep(0.2)
                    continue
                raise ToolError(
                    "The connection to Jira broke before it answered. Try again later."
                ) from None
            except requests.RequestException as exc:
                if write:
                    reason = f"the answer was unreadable ({type(exc).__name__})"
                    raise _OutcomeUnknown(reason) from None
                raise ToolError(
                    f"The request to Jira failed ({type(exc).__name__}). Try again later."
                ) from None
            except ValueError:  # a 200 that is not JSON: a proxy or login page
                if write:
                    raise _OutcomeUnknown("Jira's answer was not JSON") from None
                raise ToolError(
                    "Jira answered with something that is not JSON; check JIRA_URL."
                ) from None

    def _explain(self, exc: JIRAError, action: str, bad_request: str) -> ToolError:
        status = exc.status_code
        detail = _error_detail(exc.response)
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
            return _NotFound(f"Jira answered 404 (not found) while trying to {action}.")
        if status == 400:
            return ToolError(f"Jira rejected the {bad_request}{suffix}")
        if status == 429:
            wait = _retry_after(exc.response)
            when = f"in {wait:.0f} s" if wait is not None else "in a minute"
            return ToolError(f"Jira is rate limiting, try again {when}.")
        if status is not None and status >= 500:
            return ToolError(
                f"Jira failed with HTTP {status} while trying to {action}. Try again later."
            )
        if status is None:
            return ToolError(f"Jira gave an unexpected answer while trying to {action}.")
        return ToolError(f"Jira answered HTTP {status} while trying to {action}{suffix}")


def jira_tools(settings: Settings) -> JiraTools | None:
    """The Jira tools, or None when JIRA_URL is unset (then they are not offered)."""
    if not settings.JIRA_URL:
        return None
    return JiraTools(settings)


# ---- small pure helpers


def _issue_key(value: str) -> str:
    key = value.strip().upper()
    if not ISSUE_KEY.match(key):
        raise ToolError(f"'{value[:40]}' is not a Jira issue key; keys look like TASK-123.")
    return key


def _label(value: str) -> str:
    return "-".join(value.split())[:255]


def _trim(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    text = str(value)
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED)] + TRUNCATED


def _text(value: Any) -> str | None:
    """A description: text in REST API v2 (v3's document format is not used here)."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _name(value: Any) -> str | None:
    if isinstance(value, dict):
        return _trim(value.get("name"), NAME_LIMIT)
    return None


def _person(value: Any) -> str | None:
    if isinstance(value, dict):
        return _trim(value.get("displayName") or value.get("name"), NAME_LIMIT)
    return None


def _retry_after(response: requests.Response | None) -> float | None:
    """Retry-After in seconds (a number or an HTTP date); None when absent or unreadable."""
    if response is None:
        return None
    value = (response.headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _error_detail(response: requests.Response | None, limit: int = 1_000) -> str:
    """Jira's errorMessages and field errors as one line: 'components: X is required.'"""
    if response is None:
        return ""
    denied = response.headers.get("X-Authentication-Denied-Reason")
    if denied:
        return _trim(f"login denied ({denied})", limit) or ""
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
    text = " ".join(_trim(" ".join(p.split()), 300) or "" for p in parts)
    return _trim(text, limit) or ""


def _never_sent(exc: requests.ConnectionError) -> bool:
    """True when the connection was never made (refused, DNS): nothing reached Jira."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, NewConnectionError)
