"""A strict fake of Salesforce's REST API, for tests: the OAuth 2.0 client-credentials
token, SOQL queries (tests/fakes/salesforce_soql.py), sObject basics and reads, and the
creation of a Task; over HTTPS with the test run's CA.

    fake = FakeSalesforce(client_id="id", client_secret="secret")
    acme = fake.add_account("Acme Corp", Industry="Manufacturing", owner="Maria Silva")
    ana = fake.add_contact("Ana Lima", email="ana.lima@acme.example", account=acme)
    ...                                   # SALESFORCE_LOGIN_URL = fake.url
    assert fake.tasks[0]["WhoId"] == ana

Errors are Salesforce's: a JSON array of ``message`` and ``errorCode`` (a token error is
OAuth's ``error`` and ``error_description``). ``expire_token()`` makes the current token
answer 401 INVALID_SESSION_ID; ``permissions`` says which objects the run-as user may
query and create. Faults as FakeJira's (``fail_next``, ``hang_next``, ...).
"""

from __future__ import annotations

import base64
import re
import secrets
from datetime import UTC, datetime
from itertools import count
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.https_fake import INVALID_JSON, HttpsFake, Received
from tests.fakes.salesforce_soql import ID, SCHEMA, Query, SoqlError, parse

__all__ = ["FakeSalesforce"]

ORG_ID = "00D5g000004SbHoEAK"
USER_ID = "0055g00000AbCdEAAV"
PREFIXES = {"Account": "001", "Contact": "003", "Task": "00T", "User": "005"}
#: what the run-as user may do by default
DEFAULT_PERMISSIONS = {
    "Contact": {"queryable": True, "createable": True},
    "Account": {"queryable": True, "createable": True},
    "Task": {"queryable": True, "createable": True},
    "User": {"queryable": True, "createable": False},
}
SUBJECT_MAX = 255


class FakeSalesforce(HttpsFake):
    """A strict fake Salesforce org on 127.0.0.1; starts serving on construction."""

    def __init__(
        self,
        *,
        client_id: str = "bot-client",
        client_secret: str = "bot-secret",
        versions: tuple[str, ...] = ("66.0", "67.0"),
        permissions: dict[str, dict[str, bool]] | None = None,
    ) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.versions = versions
        self.permissions = {k: dict(v) for k, v in DEFAULT_PERMISSIONS.items()}
        for name, flags in (permissions or {}).items():
            self.permissions[name].update(flags)
        self.records: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in SCHEMA}
        self.tokens: list[str] = []
        self._valid: set[str] = set()
        self._numbers = count(1)
        super().__init__()

    # ---- test-facing API

    def add_account(self, name: str, *, owner: str | None = None, **fields: Any) -> str:
        owner_id = self._insert("User", {"Name": owner}) if owner else None
        return self._insert("Account", {"Name": name, "OwnerId": owner_id, **fields})

    def add_contact(
        self,
        name: str,
        *,
        email: str | None = None,
        account: str | None = None,
        **fields: Any,
    ) -> str:
        first, _, last = name.rpartition(" ")
        return self._insert(
            "Contact",
            {
                "Name": name,
                "FirstName": first or None,
                "LastName": last,
                "Email": email,
                "AccountId": account,
                **fields,
            },
        )

    @property
    def tasks(self) -> list[dict[str, Any]]:
        return list(self.records["Task"].values())

    def expire_token(self) -> None:
        """The tokens given so far are refused from now on (401 INVALID_SESSION_ID)."""
        with self._lock:
            self._valid.clear()

    def fault_body(self, status: int) -> Any:
        codes = {503: "SERVER_UNAVAILABLE", 500: "UNKNOWN_EXCEPTION"}
        code = codes.get(status, "UNKNOWN_EXCEPTION")
        return [{"message": f"fake Salesforce: HTTP {status}", "errorCode": code}]

    # ---- the API

    def answer(self, request: Request, record: Received, payload: Any) -> Response:
        path, method = record.path, record.method
        if path == "/services/oauth2/token":
            if method != "POST":
                return _errors(405, "METHOD_NOT_ALLOWED", f"HTTP Method '{method}' not allowed.")
            return self._token(record)
        match = re.fullmatch(r"/services/data/v(\d+\.\d)(/.*)", path)
        if match is None:
            return _errors(404, "NOT_FOUND", "The requested resource does not exist")
        version, rest = match.groups()
        if version not in self.versions:
            return _errors(404, "NOT_FOUND", "The requested resource does not exist")
        scheme, _, token = record.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or token not in self._valid:
            return _errors(401, "INVALID_SESSION_ID", "Session expired or invalid")
        if payload is INVALID_JSON:
            return _errors(400, "JSON_PARSER_ERROR", "Unexpected character: not valid JSON")
        if rest in ("/query", "/query/") and method == "GET":
            return self._query(record.query.get("q", [""])[0], version)
        if sobject := re.fullmatch(r"/sobjects/(\w+)/?", rest):
            name = sobject.group(1)
            if name not in SCHEMA:
                return _errors(404, "NOT_FOUND", f"The requested resource does not exist: {name}")
            if method == "GET":
                return JSONResponse({"objectDescribe": self._describe(name), "recentItems": []})
            if method == "POST":
                return self._create(name, payload, version)
            return _errors(405, "METHOD_NOT_ALLOWED", f"HTTP Method '{method}' not allowed.")
        if one := re.fullmatch(r"/sobjects/(\w+)/(\w+)", rest):
            found = self.records.get(one.group(1), {}).get(one.group(2))
            if found is None or method != "GET":
                return _errors(404, "NOT_FOUND", "The requested resource does not exist")
            return JSONResponse(
                self._shown(one.group(1), found, list(SCHEMA[one.group(1)]), version)
            )
        return _errors(404, "NOT_FOUND", "The requested resource does not exist")

    def _token(self, record: Received) -> Response:
        form = record.form
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        scheme, _, value = record.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "basic":
            client_id, _, client_secret = base64.b64decode(value).decode().partition(":")
        if form.get("grant_type") != "client_credentials":
            return _oauth_error("unsupported_grant_type", "grant type not supported")
        if client_id != self.client_id or client_secret != self.client_secret:
            return _oauth_error("invalid_client", "invalid client credentials")
        token = f"00D5g!{secrets.token_urlsafe(24)}"
        with self._lock:
            self.tokens.append(token)
            self._valid.add(token)
        return JSONResponse(
            {
                "access_token": token,
                "signature": secrets.token_urlsafe(16),
                "scope": "api",
                "instance_url": self.url,
                "id": f"{self.url}/id/{ORG_ID}/{USER_ID}",
                "token_type": "Bearer",
                "issued_at": str(int(datetime.now(UTC).timestamp() * 1000)),
            }
        )

    def _query(self, soql: str, version: str) -> Response:
        try:
            query = parse(soql)
        except SoqlError as exc:
            return _errors(400, exc.code, exc.message)
        if not self.permissions[query.sobject]["queryable"]:
            return _errors(400, "INVALID_TYPE", f"sObject type '{query.sobject}' is not supported.")
        rows = [self._joined(query.sobject, r) for r in self.records[query.sobject].values()]
        if query.where is not None:
            rows = [r for r in rows if query.where(r)]
        for field, descending in reversed(query.order):
            rows.sort(key=lambda r, f=field: _sort_key(r, f), reverse=descending)
        total = len(rows)
        if query.limit is not None:
            rows = rows[: query.limit]
        if not query.fields:  # COUNT()
            return JSONResponse({"totalSize": total, "done": True, "records": []})
        shown = [self._shown(query.sobject, r, query.fields, version) for r in rows]
        for record, row in zip(shown, rows, strict=True):
            for relationship, parent_field, child in query.children:
                record[relationship] = self._children(row["Id"], parent_field, child, version)
        return JSONResponse({"totalSize": len(shown), "done": True, "records": shown})

    def _children(
        self, parent: str, parent_field: str, query: Query, version: str
    ) -> dict[str, Any] | None:
        """A subquery's records under one parent; null when there are none, as Salesforce."""
        rows = [r for r in self.records[query.sobject].values() if r.get(parent_field) == parent]
        rows = [self._joined(query.sobject, r) for r in rows]
        for field, descending in reversed(query.order):
            rows.sort(key=lambda r, f=field: _sort_key(r, f), reverse=descending)
        rows = rows[: query.limit] if query.limit is not None else rows
        if not rows:
            return None
        shown = [self._shown(query.sobject, r, query.fields, version) for r in rows]
        return {"totalSize": len(shown), "done": True, "records": shown}

    def _create(self, name: str, payload: Any, version: str) -> Response:
        if not self.permissions[name]["createable"]:
            return _errors(
                400,
                "INSUFFICIENT_ACCESS_OR_READONLY",
                f"insufficient access rights on object id (create {name})",
            )
        if not isinstance(payload, dict):
            return _errors(400, "JSON_PARSER_ERROR", "The body must be a JSON object.")
        fields = SCHEMA[name]
        for key in payload:
            if key not in fields or key in ("Id", "CreatedDate"):
                return _errors(
                    400,
                    "INVALID_FIELD",
                    f"No such column '{key}' on sobject of type {name}",
                )
        subject = payload.get("Subject")
        if isinstance(subject, str) and len(subject) > SUBJECT_MAX:
            return _errors(
                400,
                "STRING_TOO_LONG",
                f"Subject: data value too large: {subject[:40]}... (max length={SUBJECT_MAX})",
            )
        for key, kind in fields.items():
            value = payload.get(key)
            if kind.startswith("ref:") and value is not None:
                target = kind.split(":")[1]
                if not (isinstance(value, str) and value in self.records[target]):
                    return _errors(
                        400,
                        "FIELD_INTEGRITY_EXCEPTION",
                        f"{key}: id value of incorrect type: {value}",
                    )
        record_id = self._insert(name, dict(payload))
        return JSONResponse({"id": record_id, "success": True, "errors": []}, status_code=201)

    def _describe(self, name: str) -> dict[str, Any]:
        flags = self.permissions[name]
        return {
            "name": name,
            "label": name,
            "keyPrefix": PREFIXES[name],
            "queryable": flags["queryable"],
            "createable": flags["createable"],
            "updateable": flags["createable"],
            "deletable": False,
            "custom": False,
        }

    # ---- records

    def _insert(self, name: str, fields: dict[str, Any]) -> str:
        record_id = f"{PREFIXES[name]}5g{next(self._numbers):010d}AAA"
        assert ID.fullmatch(record_id)
        row = dict.fromkeys(SCHEMA[name])
        row.update(fields, Id=record_id, CreatedDate=datetime.now(UTC).isoformat())
        with self._lock:
            self.records[name][record_id] = row
        return record_id

    def _joined(self, name: str, row: dict[str, Any]) -> dict[str, Any]:
        """The row with each lookup's record under its relationship's name."""
        joined = dict(row)
        for key, kind in SCHEMA[name].items():
            if kind.startswith("ref:"):
                _, target, relationship = kind.split(":")
                joined[relationship] = self.records[target].get(row.get(key) or "")
        return joined

    def _shown(
        self, name: str, row: dict[str, Any], fields: list[str], version: str
    ) -> dict[str, Any]:
        """A record as the API shows it: its attributes, then the fields asked for."""
        joined = self._joined(name, row)
        shown: dict[str, Any] = {"attributes": _attributes(name, row["Id"], version)}
        for field in fields:
            if "." in field:
                relationship, _, inner = field.partition(".")
                parent = joined.get(relationship)
                if parent is None:
                    shown[relationship] = None
                    continue
                target = next(
                    k.split(":")[1] for k in SCHEMA[name].values() if k.endswith(f":{relationship}")
                )
                entry = shown.setdefault(
                    relationship, {"attributes": _attributes(target, parent["Id"], version)}
                )
                entry[inner] = parent.get(inner)
            else:
                shown[field] = joined.get(field)
        return shown


def _attributes(name: str, record_id: str, version: str) -> dict[str, str]:
    return {"type": name, "url": f"/services/data/v{version}/sobjects/{name}/{record_id}"}


def _sort_key(row: dict[str, Any], field: str) -> tuple[int, str]:
    relationship, _, inner = field.partition(".")
    value = (row.get(relationship) or {}).get(inner) if inner else row.get(field)
    return (0, "") if value is None else (1, str(value).lower())  # nulls first


def _errors(status: int, code: str, message: str) -> Response:
    """Salesforce's error answer: a JSON array of message and errorCode."""
    return JSONResponse([{"message": message, "errorCode": code}], status_code=status)


def _oauth_error(error: str, description: str) -> Response:
    return JSONResponse({"error": error, "error_description": description}, status_code=400)
