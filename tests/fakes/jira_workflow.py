"""The fake Jira's workflow and edits: an issue's transitions (each to a status, by a name
of its own; a screen may require fields, per target status: ``screens={"Done":
["resolution"]}``), a transition done, and an issue's fields edited (rich text as a string on
API v2, as an ADF document on v3, as Jira checks them)."""

from __future__ import annotations

import datetime
import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.jira_adf import problem
from tests.fakes.jira_answers import NOT_FOUND, PRIORITIES, error, now

#: (id, name, the status it leads to): offered from every other status
TRANSITIONS = (
    ("11", "Back to do", "To Do"),
    ("21", "Start work", "In Progress"),
    ("31", "Finish", "Done"),
)
FIELD_NAMES = {"resolution": "Resolution", "fixVersions": "Fix Version/s", "comment": "Comment"}
#: the fields an edit may set
EDITABLE = {"summary", "description", "priority", "labels", "duedate"}
NOT_ON_SCREEN = "Field '{}' cannot be set. It is not on the appropriate screen, or unknown."
NOT_ADF = "Operation value must be an Atlassian Document (see the Atlassian Document Format)"


def rich_text_problem(value: Any, version: int) -> str | None:
    """Why Jira refuses ``value`` as rich text on API ``version`` (None: it takes it)."""
    if version == 3:
        return NOT_ADF if problem(value) else None
    return None if isinstance(value, str) else "Operation value must be a string"


class WorkflowMethods:
    """Mixed into FakeJira: its issues and screens, under its lock."""

    issues: dict[str, dict[str, Any]]
    screens: dict[str, list[str]]
    _lock: threading.Lock

    def _offered(self, issue: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [t for t in TRANSITIONS if t[2] != issue["status"]]

    def _transitions(self, request: Request, key: str) -> Response:
        expand = request.query_params.get("expand") or ""
        with self._lock:
            issue = self.issues.get(key.upper())
            if issue is None:
                return error(404, [NOT_FOUND])
            offered = self._offered(issue)
        listed = []
        for transition_id, name, status in offered:
            item: dict[str, Any] = {
                "id": transition_id,
                "name": name,
                "to": {
                    "name": status,
                    "id": str(TRANSITIONS.index((transition_id, name, status)) + 1),
                },
                "hasScreen": status in self.screens,
            }
            if "transitions.fields" in expand:
                item["fields"] = {
                    field: {
                        "required": field != "comment",
                        "name": FIELD_NAMES.get(field, field),
                        "hasDefaultValue": False,
                        "operations": ["set"],
                    }
                    for field in [*self.screens.get(status, []), "comment"]
                    if status in self.screens
                }
            listed.append(item)
        return JSONResponse({"expand": "transitions", "transitions": listed})

    def _transition(self, key: str, payload: Any) -> Response:
        if not isinstance(payload, dict) or not isinstance(payload.get("transition"), dict):
            return error(400, ["Missing 'transition' identifier"])
        wanted = str(payload["transition"].get("id") or "")
        with self._lock:
            issue = self.issues.get(key.upper())
            if issue is None:
                return error(404, [NOT_FOUND])
            chosen = next((t for t in self._offered(issue) if t[0] == wanted), None)
            if chosen is None:
                return error(400, [f"Transition id '{wanted}' is not valid for this issue."])
            screen = self.screens.get(chosen[2])
            fields = payload.get("fields") or {}
            errors = {
                field: NOT_ON_SCREEN.format(field)
                for field in [*fields, *(payload.get("update") or {})]
                if screen is None or field not in [*screen, "comment"]
            }
            errors.update(
                {
                    field: f"{FIELD_NAMES.get(field, field)} is required."
                    for field in screen or []
                    if fields.get(field) in (None, "", [])
                }
            )
            if errors:
                return error(400, [], errors)
            issue["status"], issue["updated"] = chosen[2], now()
        return Response(status_code=204)

    def _edit(self, key: str, payload: Any, version: int) -> Response:
        if not isinstance(payload, dict) or not isinstance(payload.get("fields", {}), dict):
            return error(400, ["Request body must contain 'fields'."])
        fields: dict[str, Any] = payload.get("fields") or {}
        errors: dict[str, str] = {}
        for name, value in fields.items():
            if name not in EDITABLE:
                errors[name] = NOT_ON_SCREEN.format(name)
            elif name == "summary" and (
                not isinstance(value, str) or not value.strip() or "\n" in value or len(value) > 255
            ):
                errors[name] = "Summary must be one line of less than 255 characters."
            elif name == "description" and value is not None:
                if found := rich_text_problem(value, version):
                    errors[name] = found
            elif name == "priority" and not (
                isinstance(value, dict) and value.get("name") in PRIORITIES
            ):
                errors[name] = f"Priority name '{(value or {}).get('name')}' is not valid"
            elif name == "labels" and (
                not isinstance(value, list)
                or not all(
                    isinstance(x, str) and x and not any(c.isspace() for c in x) for x in value
                )
            ):
                errors[name] = "The label contains spaces which is invalid."
            elif name == "duedate" and value is not None:
                try:
                    datetime.date.fromisoformat(str(value))
                except ValueError:
                    errors[name] = "Error parsing date string: " + str(value)
        if errors:
            return error(400, [], errors)
        with self._lock:
            issue = self.issues.get(key.upper())
            if issue is None:
                return error(404, [NOT_FOUND])
            for name, value in fields.items():
                issue[name] = value["name"] if name == "priority" else value
            issue["updated"] = now()
        return Response(status_code=204)
