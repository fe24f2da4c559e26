"""The fake Jira's issues: stored, created (with Jira's field checks), read, and searched
with the JQL subset."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.jira_answers import (
    NOT_FOUND,
    PRIORITIES,
    STATUS_CATEGORIES,
    error,
    field_set,
    jira_user,
    now,
)
from tests.fakes.jira_jql import JqlError, run_jql

#: fields a create may set besides the project's required ones
SETTABLE_FIELDS = {
    "project",
    "issuetype",
    "summary",
    "description",
    "priority",
    "labels",
    "assignee",
    "components",
    "duedate",
}
FIELD_NAMES = {
    "summary": "Summary",
    "description": "Description",
    "components": "Component/s",
    "priority": "Priority",
    "labels": "Labels",
    "assignee": "Assignee",
    "duedate": "Due date",
}


class IssueMethods:
    """Mixed into FakeJira: its projects, issues and lock."""

    deployment: str
    projects: dict[str, dict[str, Any]]
    issues: dict[str, dict[str, Any]]
    created: list[str]
    required_fields: dict[str, list[str]]
    _next_id: int
    _lock: threading.Lock

    def _project(self, key_or_id: str) -> dict[str, Any] | None:
        for project in self.projects.values():
            if key_or_id.upper() == project["key"] or key_or_id == project["id"]:
                return project
        return None

    def _store(
        self,
        project: dict[str, Any],
        key: str,
        values: dict[str, Any],
        created: str | None = None,
    ) -> dict[str, Any]:
        self._next_id += 1
        issue = {
            "id": str(self._next_id),
            "key": key,
            "project": project["key"],
            "created": created or now(),
            "updated": created or now(),
            **values,
        }
        self.issues[key] = issue
        return issue

    def _issue_json(
        self, request: Request, issue: dict[str, Any], fields: set[str] | None
    ) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        project = self.projects[issue["project"]]
        status = issue["status"]
        category = STATUS_CATEGORIES.get(status, "indeterminate")
        all_fields: dict[str, Any] = {
            "summary": issue["summary"],
            "description": issue["description"],
            "status": {
                "self": f"{base}/rest/api/2/status/1",
                "name": status,
                "id": "1",
                "statusCategory": {"key": category, "name": status},
            },
            "issuetype": {
                "name": issue["issuetype"],
                "id": str(project["issue_types"].index(issue["issuetype"]) + 1)
                if issue["issuetype"] in project["issue_types"]
                else "1",
                "subtask": False,
            },
            "priority": {"name": issue["priority"], "id": "3"} if issue["priority"] else None,
            "assignee": self._person(issue["assignee"]),
            "reporter": self._person(issue["reporter"]),
            "created": issue["created"],
            "updated": issue["updated"],
            "labels": issue["labels"],
            "components": [{"name": c} for c in issue.get("components", [])],
            "project": {"id": project["id"], "key": project["key"], "name": project["name"]},
        }
        if fields is not None and not ({"*all", "*navigable"} & fields):
            all_fields = {k: v for k, v in all_fields.items() if k in fields}
        return {
            "expand": "renderedFields,names,schema,operations,editmeta,changelog",
            "id": issue["id"],
            "self": f"{base}/rest/api/2/issue/{issue['id']}",
            "key": issue["key"],
            "fields": all_fields,
        }

    def _person(self, display_name: str | None) -> dict[str, Any] | None:
        return jira_user(display_name, self.deployment) if display_name else None

    def _find_issue(self, key_or_id: str) -> dict[str, Any] | None:
        issue = self.issues.get(key_or_id.upper())
        if issue is None:
            issue = next((i for i in self.issues.values() if i["id"] == key_or_id), None)
        return issue

    def _get_issue(self, request: Request, key: str) -> Response:
        with self._lock:
            issue = self._find_issue(key)
            if issue is None:
                return error(404, [NOT_FOUND])
            return JSONResponse(self._issue_json(request, issue, field_set(request, None)))

    def _create_issue(self, request: Request, payload: Any, user: dict[str, Any]) -> Response:
        if not isinstance(payload, dict) or not isinstance(payload.get("fields"), dict):
            return error(400, ["Request body must contain 'fields'."])
        fields: dict[str, Any] = payload["fields"]
        errors: dict[str, str] = {}
        project = None
        ref = fields.get("project")
        if isinstance(ref, dict) and (ref.get("key") or ref.get("id")):
            project = self._project(str(ref.get("key") or ref.get("id")))
        if project is None:
            errors["project"] = "Specify a valid project ID or key"
        issue_type = None
        ref = fields.get("issuetype")
        if project is not None:
            types = project["issue_types"]
            if isinstance(ref, dict) and ref.get("name") in types:
                issue_type = ref["name"]
            elif isinstance(ref, dict) and str(ref.get("id", "")).isdigit():
                index = int(ref["id"]) - 1
                issue_type = types[index] if 0 <= index < len(types) else None
            if issue_type is None:
                errors["issuetype"] = (
                    "Specify an issue type" if not ref else "valid issue type is required"
                )
        required = self.required_fields.get(project["key"], []) if project else []
        for name in fields:
            if name not in SETTABLE_FIELDS and name not in required:
                errors[name] = (
                    f"Field '{name}' cannot be set. It is not on the appropriate screen, "
                    "or unknown."
                )
        summary = fields.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            errors["summary"] = "You must specify a summary of the issue."
        elif len(summary) > 255:
            errors["summary"] = "Summary must be less than 255 characters."
        elif "\n" in summary or "\r" in summary:
            errors["summary"] = "The summary is invalid because it contains newline characters."
        description = fields.get("description")
        if description is not None and not isinstance(description, str):
            errors["description"] = "Operation value must be a string"
        priority = fields.get("priority")
        if priority is not None and not (
            isinstance(priority, dict) and priority.get("name") in PRIORITIES
        ):
            wanted = priority.get("name") if isinstance(priority, dict) else priority
            errors["priority"] = f"Priority name '{wanted}' is not valid"
        labels = fields.get("labels", [])
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            errors["labels"] = "Field 'labels' must be a list of strings."
        else:
            for label in labels:
                if not label or any(c.isspace() for c in label) or len(label) > 255:
                    errors["labels"] = f"The label '{label}' contains spaces which is invalid."
        for name in required:
            value = fields.get(name)
            if value in (None, "", []):
                errors[name] = f"{FIELD_NAMES.get(name, name)} is required."
        if errors:
            return JSONResponse({"errorMessages": [], "errors": errors}, status_code=400)

        assert project is not None and issue_type is not None
        with self._lock:
            key = f"{project['key']}-{project['next']}"
            project["next"] += 1
            issue = self._store(
                project,
                key,
                {
                    "summary": summary,
                    "description": description,
                    "issuetype": issue_type,
                    "status": "To Do",
                    "priority": priority["name"] if priority else "Medium",
                    "assignee": None,
                    "reporter": user["displayName"],
                    "labels": list(labels),
                    "components": [
                        c.get("name") for c in fields.get("components") or [] if isinstance(c, dict)
                    ],
                },
            )
            self.created.append(key)
        base = str(request.base_url).rstrip("/")
        return JSONResponse(
            {"id": issue["id"], "key": key, "self": f"{base}/rest/api/2/issue/{issue['id']}"},
            status_code=201,
        )

    def _search(
        self, request: Request, payload: Any, *, new_api: bool, user: dict[str, Any]
    ) -> Response:
        if request.method == "POST":
            if not isinstance(payload, dict):
                return error(400, ["Request body must be a JSON object."])
            allowed = (
                {
                    "jql",
                    "nextPageToken",
                    "maxResults",
                    "fields",
                    "expand",
                    "properties",
                    "fieldsByKeys",
                    "failFast",
                    "reconcileIssues",
                }
                if new_api
                else {"jql", "startAt", "maxResults", "fields", "expand", "validateQuery"}
            )
            unknown = [k for k, v in payload.items() if k not in allowed and v is not None]
            if unknown:
                return error(400, [f'Unrecognized field "{unknown[0]}"'])
            params = payload
            fields = set(payload["fields"]) if payload.get("fields") else None
        else:
            params = {k: request.query_params.get(k) for k in request.query_params}
            fields = field_set(request, None)
        jql = params.get("jql") or ""
        try:
            max_results = int(params.get("maxResults") or 50)
            start = (
                decode_token(params.get("nextPageToken"))
                if new_api
                else int(params.get("startAt") or 0)
            )
        except ValueError:
            return error(400, ["Invalid pagination parameters."])
        if new_api and fields is None:
            fields = {"id"}
        max_results = max(0, min(max_results, 5000 if new_api else 1000))
        with self._lock:
            try:
                found = run_jql(jql, list(self.issues.values()), self.projects, user)
            except JqlError as exc:
                return error(400, [f"Error in the JQL Query: {exc}"])
            page = found[start : start + max_results]
            issues = [self._issue_json(request, issue, fields) for issue in page]
        if new_api:
            for item in issues:
                if fields == {"id"}:
                    item.pop("key", None)
                    item["fields"] = {}
            more = start + len(page) < len(found)
            body: dict[str, Any] = {"issues": issues, "isLast": not more}
            if more:
                body["nextPageToken"] = encode_token(start + len(page))
            return JSONResponse(body)
        return JSONResponse(
            {
                "expand": "schema,names",
                "startAt": start,
                "maxResults": max_results,
                "total": len(found),
                "issues": issues,
            }
        )


def encode_token(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def decode_token(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError("bad token") from exc
