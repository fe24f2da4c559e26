"""The fake HubSpot through httpx2 (the client the bot's HubSpot connection uses), over
HTTPS with the test run's CA: the search validated as HubSpot documents it, associations,
notes, scopes, 401 and 429 as HubSpot answers them."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.fakes.hubspot_server import PORTAL_ID, FakeHubSpot
from tests.fakes.tls import ca_file

pytestmark = pytest.mark.xdist_group("hubspot_fake")

TOKEN = "pat-na1-fake"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeHubSpot]:
    with FakeHubSpot(token=TOKEN) as served:
        acme = served.add_company("Acme Corp", industry="MANUFACTURING")
        served.add_contact("Ana", "Lima", company=acme, email="ana.lima@acme.example")
        served.add_contact("Sean", "O'Brien", company=acme, email="sean@acme.example")
        yield served


@pytest.fixture
def http(fake: FakeHubSpot) -> Iterator[httpx2.Client]:
    fake.reset()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    context = ssl.create_default_context(cafile=str(ca_file()))
    with httpx2.Client(base_url=fake.url, headers=headers, verify=context) as client:
        yield client


def search(http: httpx2.Client, body: dict[str, Any]) -> httpx2.Response:
    return http.post("/crm/v3/objects/contacts/search", json=body)


def token_filter(value: str, name: str = "lastname") -> dict[str, str]:
    return {"propertyName": name, "operator": "CONTAINS_TOKEN", "value": value}


def test_search_finds_by_token_and_wildcard(http: httpx2.Client) -> None:
    found = search(
        http,
        {
            "filterGroups": [{"filters": [token_filter("*brien*")]}],
            "properties": ["firstname", "lastname"],
            "limit": 200,
        },
    )
    assert found.status_code == 200
    (contact,) = found.json()["results"]
    assert contact["properties"]["lastname"] == "O'Brien"
    groups = [{"filters": [token_filter("*ana*", p)]} for p in ("firstname", "email")]
    assert search(http, {"filterGroups": groups}).json()["total"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {"filterGroups": [], "color": "blue"},
        {"filterGroups": [{"filters": [token_filter("a")]}] * 6},
        {"filterGroups": [{"filters": [token_filter("a")] * 7}]},
        {"filterGroups": [{"filters": [token_filter("a")] * 6}] * 4},
        {"limit": 201},
        {"filterGroups": [{"filters": [token_filter("a", "nickname")]}]},
        {"filterGroups": [{"filters": [{**token_filter("a"), "operator": "LIKE"}]}]},
        {"sorts": [{"propertyName": "lastname"}, {"propertyName": "firstname"}]},
    ],
    ids=[
        "unknown key",
        "6 groups",
        "7 in a group",
        "24 filters",
        "limit 201",
        "no property",
        "no operator",
        "two sorts",
    ],
)
def test_what_the_search_refuses(http: httpx2.Client, body: dict[str, Any]) -> None:
    refused = search(http, body)
    assert refused.status_code == 400
    answer = refused.json()
    assert answer["category"] == "VALIDATION_ERROR" and answer["status"] == "error"
    assert answer["message"] and answer["correlationId"]


def test_a_company_with_its_contacts_and_a_contact_with_its_company(http: httpx2.Client) -> None:
    contacts = search(http, {"filterGroups": [{"filters": [token_filter("lima")]}]}).json()
    ana = contacts["results"][0]["id"]
    links = http.post(
        "/crm/v4/associations/contacts/companies/batch/read", json={"inputs": [{"id": ana}]}
    ).json()
    (link,) = links["results"]
    (company,) = link["to"]
    assert {"category": "HUBSPOT_DEFINED", "typeId": 1, "label": "Primary"} in company[
        "associationTypes"
    ]
    read = http.get(
        f"/crm/v3/objects/companies/{company['toObjectId']}",
        params={"properties": "name,industry", "associations": "contacts"},
    ).json()
    assert read["properties"]["name"] == "Acme Corp"
    assert ana in [r["id"] for r in read["associations"]["contacts"]["results"]]
    missing = http.get("/crm/v3/objects/companies/999999")
    assert missing.status_code == 404 and missing.json()["category"] == "OBJECT_NOT_FOUND"


def test_a_note_is_associated_and_found_by_its_contact(
    http: httpx2.Client, fake: FakeHubSpot
) -> None:
    ana = search(http, {"filterGroups": [{"filters": [token_filter("lima")]}]}).json()
    contact = ana["results"][0]["id"]
    to_contact = [{"associationCategory": "HUBSPOT_DEFINED", "associationTypeId": 202}]
    note = {
        "properties": {"hs_timestamp": "2026-12-06T10:00:00Z", "hs_note_body": "<p>ref bot-77</p>"},
        "associations": [{"to": {"id": contact}, "types": to_contact}],
    }
    assert http.post("/crm/v3/objects/notes", json=note).status_code == 201
    without_time = {**note, "properties": {"hs_note_body": "x"}}
    refused = http.post("/crm/v3/objects/notes", json=without_time)
    assert refused.status_code == 400 and refused.json()["category"] == "VALIDATION_ERROR"
    filters = [
        {"propertyName": "associations.contact", "operator": "EQ", "value": contact},
        {"propertyName": "hs_note_body", "operator": "CONTAINS_TOKEN", "value": "bot-77"},
    ]
    found = http.post("/crm/v3/objects/notes/search", json={"filterGroups": [{"filters": filters}]})
    assert found.json()["total"] == 1 and len(fake.notes_of(contact)) == 1


def test_scopes_token_and_rate_limit(http: httpx2.Client, fake: FakeHubSpot) -> None:
    info = http.post("/oauth/v2/private-apps/get/access-token-info", json={"tokenKey": TOKEN})
    assert (
        info.json()["hubId"] == PORTAL_ID and "crm.objects.contacts.read" in info.json()["scopes"]
    )
    assert http.get("/account-info/v3/details").json()["portalId"] == PORTAL_ID
    wrong = http.get("/account-info/v3/details", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["category"] == "INVALID_AUTHENTICATION"
    fake.throttle_next(retry_after_s=2)
    limited = search(http, {})
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "2"
    assert limited.headers["X-HubSpot-RateLimit-Remaining"] == "0"
    assert limited.json()["errorType"] == "RATE_LIMIT"
    assert search(http, {}).status_code == 200
    fake.scopes.discard("crm.objects.companies.read")
    try:
        denied = http.get("/crm/v3/objects/companies/101")
    finally:
        fake.scopes.add("crm.objects.companies.read")
    assert denied.status_code == 403 and denied.json()["category"] == "MISSING_SCOPES"
