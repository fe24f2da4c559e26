"""The pieces of the fake Jira's answers: its users, its error bodies, the fields it lists,
and the issue fields a request asks for."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

PRIORITIES = ("Highest", "High", "Medium", "Low", "Lowest")
STATUS_CATEGORIES = {"To Do": "new", "In Progress": "indeterminate", "Done": "done"}
NOT_FOUND = "Issue does not exist or you do not have permission to see it."


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000+0000")


def jira_user(
    display_name: str,
    deployment: str,
    *,
    email: str | None = None,
    name: str | None = None,
    base: str = "",
) -> dict[str, Any]:
    """A user as Jira shows one: by account id on Cloud, by name on Server (``base``: the
    fake's URL, for the user's ``self``)."""
    slug = re.sub(r"[^a-z0-9]+", ".", display_name.lower()).strip(".") or "user"
    if deployment == "Cloud":
        account_id = f"5b10a2844c20165700ede{abs(hash(slug)) % 10**6:06d}"
        return {
            "self": f"{base}/rest/api/2/user?accountId={account_id}",
            "accountId": account_id,
            "displayName": display_name,
            "emailAddress": email or f"{slug}@example.com",
            "active": True,
            "accountType": "atlassian",
        }
    return {
        "self": f"{base}/rest/api/2/user?username={name or slug}",
        "name": name or slug,
        "key": name or slug,
        "displayName": display_name,
        "emailAddress": email or f"{slug}@example.com",
        "active": True,
    }


def error(status: int, messages: list[str], errors: dict[str, str] | None = None) -> Response:
    """Jira's error answer: ``errorMessages`` and the ``errors`` by field."""
    return JSONResponse({"errorMessages": messages, "errors": errors or {}}, status_code=status)


def field_set(request: Request, default: set[str] | None) -> set[str] | None:
    """The issue fields the request's ``fields`` parameters ask for, or ``default``."""
    values = [v for raw in request.query_params.getlist("fields") for v in raw.split(",")]
    values = [v.strip() for v in values if v.strip()]
    return set(values) if values else default


def field_listing(required: dict[str, list[str]]) -> list[dict[str, Any]]:
    """GET /field: the system fields, and the custom ones some project requires."""
    names = {
        "summary": "Summary",
        "description": "Description",
        "status": "Status",
        "issuetype": "Issue Type",
        "priority": "Priority",
        "assignee": "Assignee",
        "reporter": "Reporter",
        "created": "Created",
        "updated": "Updated",
        "labels": "Labels",
        "components": "Component/s",
        "project": "Project",
    }
    extra = {f for fields in required.values() for f in fields if f not in names}
    result = [
        {
            "id": fid,
            "key": fid,
            "name": name,
            "custom": False,
            "navigable": True,
            "searchable": True,
            "clauseNames": [fid],
        }
        for fid, name in names.items()
    ]
    result += [
        {
            "id": fid,
            "key": fid,
            "name": fid,
            "custom": True,
            "navigable": True,
            "searchable": True,
            "clauseNames": [fid, f"cf[{fid.rsplit('_', 1)[-1]}]"],
        }
        for fid in sorted(extra)
    ]
    return result
