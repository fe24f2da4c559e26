"""A strict fake of HubSpot's CRM API v3 (with v4's association reads), for tests: contacts
and companies with their associations, the CRM search (tests/fakes/hubspot_search.py),
batch reads, notes, the account's details and a private app token's scopes; over HTTPS
with the test run's CA.

    fake = FakeHubSpot(token="pat-na1-test")
    acme = fake.add_company("Acme Corp", industry="MANUFACTURING")
    ana = fake.add_contact("Ana", "Lima", email="ana.lima@acme.example", company=acme)
    ...                                    # HUBSPOT_BASE_URL = fake.url
    assert fake.notes_of(ana)

Errors are HubSpot's: ``status``, ``message``, ``correlationId``, ``category``
(VALIDATION_ERROR, MISSING_SCOPES, OBJECT_NOT_FOUND, RATE_LIMITS, ...). A request lacking a
scope its endpoint needs is a 403; ``throttle_next`` answers 429 with HubSpot's headers.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from itertools import count
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.https_fake import INVALID_JSON, HttpsFake, Received
from tests.fakes.hubspot_search import Invalid, run, validate

__all__ = ["FakeHubSpot"]

PORTAL_ID = 24681357
READ_CONTACTS, READ_COMPANIES = "crm.objects.contacts.read", "crm.objects.companies.read"
WRITE_CONTACTS = "crm.objects.contacts.write"
ALL_SCOPES = (READ_CONTACTS, READ_COMPANIES, WRITE_CONTACTS, "oauth")
PROPERTIES = {
    "contacts": {"firstname", "lastname", "email", "phone", "jobtitle", "company"},
    "companies": {
        "name",
        "domain",
        "industry",
        "type",
        "phone",
        "city",
        "country",
        "description",
        "lifecyclestage",
    },
    "notes": {"hs_note_body", "hs_timestamp", "hubspot_owner_id", "hs_attachment_ids"},
}
#: every object's properties HubSpot keeps itself
SYSTEM = {"hs_object_id", "createdate", "lastmodifieddate", "hs_createdate"}
#: what reading an object needs
READ_SCOPE = {"contacts": READ_CONTACTS, "companies": READ_COMPANIES, "notes": READ_CONTACTS}
NOTE_TO_CONTACT = 202
MAX_BATCH = 100


class FakeHubSpot(HttpsFake):
    """A strict fake HubSpot portal on 127.0.0.1; starts serving on construction."""

    def __init__(self, *, token: str = "pat-na1-test", scopes: tuple[str, ...] = ALL_SCOPES):
        self.token = token
        self.scopes = set(scopes)
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in PROPERTIES}
        self._ids = count(101)
        super().__init__()

    # ---- test-facing API

    def add_company(self, name: str, **properties: str) -> str:
        return self._insert("companies", {"name": name, **properties})

    def add_contact(
        self, first: str, last: str, *, company: str | None = None, **properties: str
    ) -> str:
        contact = self._insert("contacts", {"firstname": first, "lastname": last, **properties})
        if company is not None:
            self.objects["contacts"][contact]["associations"]["companies"].append(company)
            self.objects["companies"][company]["associations"]["contacts"].append(contact)
        return contact

    def notes_of(self, contact: str) -> list[dict[str, Any]]:
        return [
            n["properties"]
            for n in self.objects["notes"].values()
            if contact in n["associations"]["contacts"]
        ]

    def throttle_next(self, times: int = 1, retry_after_s: float = 1.0, path: str = ".*") -> None:
        """The next ``times`` requests get HubSpot's 429, with its rate-limit headers."""
        headers = {
            "Retry-After": f"{retry_after_s:g}",
            "X-HubSpot-RateLimit-Interval-Milliseconds": "10000",
            "X-HubSpot-RateLimit-Max": "190",
            "X-HubSpot-RateLimit-Remaining": "0",
            "X-HubSpot-RateLimit-Secondly": "19",
            "X-HubSpot-RateLimit-Secondly-Remaining": "0",
        }
        body = {
            "status": "error",
            "message": "You have reached your ten_secondly_rolling limit.",
            "errorType": "RATE_LIMIT",
            "correlationId": str(uuid.uuid4()),
            "policyName": "TEN_SECONDLY_ROLLING",
        }
        self.fail_next(path, 429, headers, body, times)

    def fault_body(self, status: int) -> Any:
        return _body("error", f"fake HubSpot: HTTP {status}", "SERVICE_UNAVAILABLE")

    # ---- the API

    def answer(self, request: Request, record: Received, payload: Any) -> Response:
        path, method = record.path, record.method
        if path == "/oauth/v2/private-apps/get/access-token-info" and method == "POST":
            return self._token_info(payload)
        if record.headers.get("authorization") != f"Bearer {self.token}":
            return _error(
                401,
                "Authentication credentials not found. This API supports OAuth 2.0 "
                "authentication and you can find more details at https://developers.hubspot.com/",
                "INVALID_AUTHENTICATION",
            )
        if payload is INVALID_JSON:
            return _error(400, "Invalid input JSON: not valid JSON.", "VALIDATION_ERROR")
        if path == "/account-info/v3/details" and method == "GET":
            return JSONResponse(
                {
                    "portalId": PORTAL_ID,
                    "accountType": "STANDARD",
                    "timeZone": "Europe/Lisbon",
                    "companyCurrency": "EUR",
                    "additionalCurrencies": [],
                    "utcOffset": "+00:00",
                    "utcOffsetMilliseconds": 0,
                    "uiDomain": "app-eu1.hubspot.com",
                    "dataHostingLocation": "eu1",
                }
            )
        parts = path.strip("/").split("/")
        if parts[:2] == ["crm", "v4"] and parts[2:4] == ["associations", "contacts"]:
            if parts[4:] == ["companies", "batch", "read"] and method == "POST":
                return self._associations(payload)
        if parts[:3] == ["crm", "v3", "objects"] and len(parts) >= 4 and parts[3] in PROPERTIES:
            kind, rest = parts[3], parts[4:]
            missing = self._missing(READ_SCOPE[kind] if method == "GET" or rest else None, kind)
            if rest == [] and method == "POST":
                if kind != "notes":
                    return _error(405, "fake HubSpot creates notes only", "VALIDATION_ERROR")
                return self._missing(WRITE_CONTACTS, kind) or self._create_note(payload)
            if missing:
                return missing
            if rest == ["search"] and method == "POST":
                return self._search(kind, payload)
            if rest == ["batch", "read"] and method == "POST":
                return self._batch_read(kind, payload)
            if len(rest) == 1 and method == "GET":
                return self._read(kind, rest[0], record.query)
        return _error(404, f"fake HubSpot: no route for {method} {path}", "OBJECT_NOT_FOUND")

    def _token_info(self, payload: Any) -> Response:
        if not isinstance(payload, dict) or payload.get("tokenKey") != self.token:
            return _error(401, "The access token is invalid or expired.", "INVALID_AUTHENTICATION")
        return JSONResponse(
            {"userId": 5550001, "hubId": PORTAL_ID, "appId": 3330001, "scopes": sorted(self.scopes)}
        )

    def _missing(self, scope: str | None, kind: str) -> Response | None:
        needed = [scope] if scope else []
        if kind == "notes" and scope == WRITE_CONTACTS:
            needed.append(READ_CONTACTS)
        lacking = [s for s in needed if s not in self.scopes]
        if not lacking:
            return None
        body = _body(
            "error",
            "This app hasn't been granted all required scopes to make this call. Read more "
            "about required scopes here: https://developers.hubspot.com/scopes.",
            "MISSING_SCOPES",
        )
        body["errors"] = [
            {
                "message": "One or more of the following scopes are required.",
                "context": {"requiredGranularScopes": lacking},
            }
        ]
        return JSONResponse(body, status_code=403)

    def _search(self, kind: str, payload: Any) -> Response:
        associations = {"company"} if kind == "contacts" else {"contact"}
        try:
            validate(payload, PROPERTIES[kind] | SYSTEM, associations)
        except Invalid as exc:
            return _error(400, str(exc), "VALIDATION_ERROR")
        searchable = {
            record_id: {
                "properties": record["properties"],
                "associations": {k[:-1]: v for k, v in record["associations"].items()},
            }
            for record_id, record in self.objects[kind].items()
        }
        found = run(payload, searchable)
        asked = payload.get("properties") or []
        return JSONResponse(
            {"total": len(found), "results": [self._shown(kind, i, asked) for i, _ in found]}
        )

    def _batch_read(self, kind: str, payload: Any) -> Response:
        inputs = payload.get("inputs") if isinstance(payload, dict) else None
        if not isinstance(inputs, list) or not 0 < len(inputs) <= MAX_BATCH:
            return _error(400, f"inputs must hold 1 to {MAX_BATCH} ids.", "VALIDATION_ERROR")
        asked = payload.get("properties") or []
        ids = [str(i.get("id")) for i in inputs if isinstance(i, dict)]
        results = [self._shown(kind, i, asked) for i in ids if i in self.objects[kind]]
        return JSONResponse({"status": "COMPLETE", "results": results, **_times()})

    def _read(self, kind: str, record_id: str, query: dict[str, list[str]]) -> Response:
        if record_id not in self.objects[kind]:
            return _error(
                404,
                "Object not found.  objectId are usually numeric.",
                "OBJECT_NOT_FOUND",
            )
        asked = [p for raw in query.get("properties", []) for p in raw.split(",") if p]
        shown = self._shown(kind, record_id, asked)
        wanted = [a for raw in query.get("associations", []) for a in raw.split(",") if a]
        linked = self.objects[kind][record_id]["associations"]
        if wanted:
            shown["associations"] = {
                other: {
                    "results": [
                        {"id": i, "type": f"{kind[:-1]}_to_{other[:-1]}"} for i in linked[other]
                    ]
                }
                for other in wanted
                if linked.get(other)
            }
        return JSONResponse(shown)

    def _associations(self, payload: Any) -> Response:
        missing = self._missing(READ_CONTACTS, "contacts") or self._missing(
            READ_COMPANIES, "companies"
        )
        if missing:
            return missing
        inputs = payload.get("inputs") if isinstance(payload, dict) else None
        if not isinstance(inputs, list) or not 0 < len(inputs) <= MAX_BATCH:
            return _error(400, f"inputs must hold 1 to {MAX_BATCH} ids.", "VALIDATION_ERROR")
        results, errors = [], []
        for item in inputs:
            contact = self.objects["contacts"].get(str(item.get("id")))
            companies = contact["associations"]["companies"] if contact else []
            if not companies:
                errors.append(
                    {
                        "status": "error",
                        "category": "OBJECT_NOT_FOUND",
                        "subCategory": "crm.associations.NO_ASSOCIATIONS_FOUND",
                        "message": f"No company is associated with contact {item.get('id')}.",
                        "context": {"fromObjectId": [str(item.get("id"))]},
                    }
                )
                continue
            results.append(
                {
                    "from": {"id": str(item["id"])},
                    "to": [
                        {
                            "toObjectId": int(company),
                            "associationTypes": [
                                {"category": "HUBSPOT_DEFINED", "typeId": 279, "label": None},
                                *(
                                    [
                                        {
                                            "category": "HUBSPOT_DEFINED",
                                            "typeId": 1,
                                            "label": "Primary",
                                        }
                                    ]
                                    if n == 0
                                    else []
                                ),
                            ],
                        }
                        for n, company in enumerate(companies)
                    ],
                }
            )
        body: dict[str, Any] = {"status": "COMPLETE", "results": results, **_times()}
        if errors:
            body["errors"] = errors
            body["numErrors"] = len(errors)
        return JSONResponse(body, status_code=207 if errors else 200)

    def _create_note(self, payload: Any) -> Response:
        if not isinstance(payload, dict) or set(payload) - {"properties", "associations"}:
            return _error(
                400, "Invalid input JSON: properties and associations.", "VALIDATION_ERROR"
            )
        properties = payload.get("properties") or {}
        unknown = [p for p in properties if p not in PROPERTIES["notes"]]
        if unknown or not properties.get("hs_timestamp"):
            what = (
                f"Property {unknown[0]!r} does not exist" if unknown else "hs_timestamp is required"
            )
            return _error(400, f"Property values were not valid: {what}", "VALIDATION_ERROR")
        contacts = []
        for link in payload.get("associations") or []:
            target = str((link.get("to") or {}).get("id"))
            types = link.get("types") or []
            ok = [
                t
                for t in types
                if t.get("associationCategory") == "HUBSPOT_DEFINED"
                and t.get("associationTypeId") == NOTE_TO_CONTACT
            ]
            if not ok or target not in self.objects["contacts"]:
                return _error(
                    400,
                    f"Could not associate the note with {target}: no such contact or type.",
                    "VALIDATION_ERROR",
                )
            contacts.append(target)
        note = self._insert("notes", dict(properties))
        self.objects["notes"][note]["associations"]["contacts"] = contacts
        return JSONResponse(self._shown("notes", note, list(properties)), status_code=201)

    # ---- records

    def _insert(self, kind: str, properties: dict[str, Any]) -> str:
        record_id = str(next(self._ids))
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.objects[kind][record_id] = {
            "properties": {**properties, "hs_object_id": record_id, "createdate": now},
            "associations": {"contacts": [], "companies": []},
            "created": now,
        }
        return record_id

    def _shown(self, kind: str, record_id: str, asked: list[str]) -> dict[str, Any]:
        record = self.objects[kind][record_id]
        names = set(asked) | {"hs_object_id", "createdate"}
        return {
            "id": record_id,
            "properties": {
                n: record["properties"].get(n) for n in names if n in PROPERTIES[kind] | SYSTEM
            },
            "createdAt": record["created"],
            "updatedAt": record["created"],
            "archived": False,
        }


def _body(status: str, message: str, category: str) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "correlationId": str(uuid.uuid4()),
        "category": category,
    }


def _error(status: int, message: str, category: str) -> Response:
    return JSONResponse(_body("error", message, category), status_code=status)


def _times() -> dict[str, str]:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"startedAt": now, "completedAt": now}
