"""The fake Jira's people: its users (``add_user``), the user search (Cloud ``query=``;
Server ``username=``: Cloud refuses ``username``, as in its GDPR strict mode), the users an
issue can be assigned to, and the assignment (Cloud names a user by ``accountId``, Server by
``name``)."""

from __future__ import annotations

import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.jira_answers import NOT_FOUND, error, jira_user, now

GDPR = "The query parameter 'username' is not supported in GDPR strict mode."
ACCOUNT_ID_ONLY = "'accountId' must be the only user identifying parameter in GDPR strict mode."


class PeopleMethods:
    """Mixed into FakeJira: its users and issues, under its lock."""

    deployment: str
    url: str
    issues: dict[str, dict[str, Any]]
    users: dict[str, dict[str, Any]]
    unassignable: set[str]
    _lock: threading.Lock

    def add_user(
        self,
        display_name: str,
        email: str | None = None,
        *,
        name: str | None = None,
        assignable: bool = True,
    ) -> dict[str, Any]:
        """A user of this Jira; ``assignable=False``: no issue can be assigned to them."""
        user = jira_user(display_name, self.deployment, email=email, name=name, base=self.url)
        with self._lock:
            self.users[self._user_id(user)] = user
            if not assignable:
                self.unassignable.add(self._user_id(user))
        return user

    def user_named(self, display_name: str) -> dict[str, Any] | None:
        """The user of that display name, if one was added."""
        return next((u for u in self.users.values() if u["displayName"] == display_name), None)

    def _user_id(self, user: dict[str, Any]) -> str:
        return str(user.get("accountId") or user.get("name"))

    def _person(self, display_name: str | None) -> dict[str, Any] | None:
        if not display_name:
            return None
        return self.user_named(display_name) or jira_user(display_name, self.deployment)

    def _search_users(self, request: Request, *, assignable: bool) -> Response:
        params = request.query_params
        if self.deployment == "Cloud":
            if "username" in params:
                return error(400, [GDPR])
            wanted = params.get("query")
        else:
            wanted = params.get("username")
        if assignable and not (params.get("issueKey") or params.get("project")):
            return error(400, ["The issue key or project must be given."])
        if not assignable and wanted is None:
            param = "query" if self.deployment == "Cloud" else "username"
            return error(400, [f"The {param} query parameter was not provided"])
        if assignable and params.get("issueKey") and params["issueKey"].upper() not in self.issues:
            return error(404, [NOT_FOUND])
        needle = (wanted or "").casefold()
        try:
            limit = int(params.get("maxResults") or 50)
        except ValueError:
            return error(400, ["maxResults must be a number."])
        with self._lock:
            found = [
                u
                for u in self.users.values()
                if needle in u["displayName"].casefold()
                or u["emailAddress"].casefold().startswith(needle)
                or needle == str(u.get("name", "")).casefold()
            ]
            if assignable:
                found = [u for u in found if self._user_id(u) not in self.unassignable]
        return JSONResponse(found[:limit])

    def _assign(self, key: str, payload: Any) -> Response:
        if not isinstance(payload, dict):
            return error(400, ["Request body must be a JSON object."])
        if self.deployment == "Cloud":
            if "name" in payload:
                return error(400, [ACCOUNT_ID_ONLY])
            wanted = payload.get("accountId")
        else:
            wanted = payload.get("name")
        with self._lock:
            issue = self.issues.get(key.upper())
            if issue is None:
                return error(404, [NOT_FOUND])
            if wanted is None:
                issue["assignee"] = None
            else:
                user = self.users.get(str(wanted))
                if user is None:
                    return error(400, [], {"assignee": f"User '{wanted}' does not exist."})
                if str(wanted) in self.unassignable:
                    name = user["displayName"]
                    return error(400, [], {"assignee": f"User '{name}' cannot be assigned issues."})
                issue["assignee"] = user["displayName"]
            issue["updated"] = now()
        return Response(status_code=204)
