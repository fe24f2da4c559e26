"""The fake Jira's issues: stored, created (with Jira's field checks), read, and searched
with the JQL subset."""

from __future__ import annotations

import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.jira_adf import as_document, as_text
from tests.fakes.jira_answers import (
    NOT_FOUND,
    PRIORITIES,
    STATUS_CATEGORIES,
    error,
    field_set,
    now,
)
from tests.fakes.jira_workflow import rich_text_problem

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
    users: dict[str, dict[str, Any]]
    _next_id: int
    _lock: threading.Lock
    # of the other mixins (jira_people, jira_comments)
    _person: Any
    _comment_json: Any
    _links_of: Any

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
        self, request: Request, issue: dict[str, Any], fields: set[str] | None, version: int = 2
    ) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        project = self.projects[issue["project"]]
        status = issue["status"]
        category = STATUS_CATEGORIES.get(status, "indeterminate")
        comments = [
            self._comment_json(c, version, properties=False) for c in issue.get("comments", [])
        ]
        all_fields: dict[str, Any] = {
            "summary": issue["summary"],
            "description": as_document(issue["description"])
            if version == 3
            else as_text(issue["description"]),
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
            "duedate": issue.get("duedate"),
            "comment": {
                "comments": comments,
                "maxResults": len(comments),
                "total": len(comments),
                "startAt": 0,
            },
            "issuelinks": self._links_of(issue["key"]),
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

    def _find_issue(self, key_or_id: str) -> dict[str, Any] | None:
        issue = self.issues.get(key_or_id.upper())
        if issue is None:
            issue = next((i for i in self.issues.values() if i["id"] == key_or_id), None)
        return issue

    def _get_issue(self, request: Request, key: str, version: int = 2) -> Response:
        with self._lock:
            issue = self._find_issue(key)
            if issue is None:
                return error(404, [NOT_FOUND])
            return JSONResponse(self._issue_json(request, issue, field_set(request, None), version))

    def _create_issue(
        self, request: Request, payload: Any, user: dict[str, Any], version: int = 2
    ) -> Response:
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
        reporter = user
        if "reporter" in fields and project is not None and project["modify_reporter"]:
            wanted = fields["reporter"] if isinstance(fields["reporter"], dict) else {}
            named = self.users.get(str(wanted.get("accountId") or wanted.get("name")))
            if named is None:
                errors["reporter"] = "Specify a valid user as the reporter."
            else:
                reporter = named
        for name in fields:
            if name == "reporter" and project is not None and project["modify_reporter"]:
                continue
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
        if description is not None and (found := rich_text_problem(description, version)):
            errors["description"] = found
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
                    "reporter": reporter["displayName"],
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

    def _project_json(self, request: Request, project: dict[str, Any]) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        return {
            "self": f"{base}/rest/api/2/project/{project['id']}",
            "id": project["id"],
            "key": project["key"],
            "name": project["name"],
            "projectTypeKey": "software",
            "issueTypes": [
                {"id": str(i + 1), "name": name, "subtask": False}
                for i, name in enumerate(project["issue_types"])
            ],
        }

    def _createmeta(self, request: Request) -> dict[str, Any]:
        keys = ",".join(request.query_params.getlist("projectKeys")).split(",")
        projects = [p for p in self.projects.values() if not keys[0] or p["key"] in keys]
        return {
            "projects": [
                {
                    "id": p["id"],
                    "key": p["key"],
                    "name": p["name"],
                    "issuetypes": [
                        {"id": str(i + 1), "name": name, "subtask": False}
                        for i, name in enumerate(p["issue_types"])
                    ],
                }
                for p in projects
            ]
        }
