"""The CRM fakes the scenarios share: one fake Salesforce and one fake HubSpot a test
process (started on first use), holding the sample records of ``examples/`` and an
O'Brien, emptied of requests and scripted trouble for each test; and the settings that
point the bot at each CRM.

Use the fixtures by importing them into a conftest (``from tests.crm_fakes import ...``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.hubspot_server import FakeHubSpot
from tests.fakes.salesforce_server import FakeSalesforce
from tests.fakes.tls import tls_settings

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SF_CLIENT, SF_SECRET = "bot-client-id", "bot-client-secret-7f3a"
HUBSPOT_TOKEN = "pat-na1-5e0c1d2b-test"
#: one more contact, at Acme: a name with a quote in it
OBRIEN = {"name": "Sean O'Brien", "email": "sean.obrien@acme.example", "title": "Buyer"}


def _examples() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    with (EXAMPLES / "accounts.csv").open(encoding="utf-8") as accounts:
        account_rows = list(csv.DictReader(accounts))
    with (EXAMPLES / "contacts.csv").open(encoding="utf-8") as contacts:
        contact_rows = list(csv.DictReader(contacts))
    contact_rows.append({**OBRIEN, "id": "c-103", "account_id": "acc-001", "phone": ""})
    return account_rows, contact_rows


def seeded_salesforce() -> FakeSalesforce:
    """A fake Salesforce, started, holding the sample records."""
    fake = FakeSalesforce(client_id=SF_CLIENT, client_secret=SF_SECRET)
    accounts, contacts = _examples()
    ids = {
        a["id"]: fake.add_account(
            a["name"],
            owner=a["owner"],
            Industry=a["industry"],
            Type="Customer",
            Description=a["notes"],
            BillingCountry=a["region"],
        )
        for a in accounts
    }
    for c in contacts:
        fake.add_contact(
            c["name"],
            email=c["email"],
            account=ids[c["account_id"]],
            Title=c["title"],
            Phone=c["phone"] or None,
        )
    return fake


def seeded_hubspot() -> FakeHubSpot:
    """A fake HubSpot, started, holding the sample records."""
    fake = FakeHubSpot(token=HUBSPOT_TOKEN)
    accounts, contacts = _examples()
    ids = {
        a["id"]: fake.add_company(a["name"], industry=a["industry"].upper(), description=a["notes"])
        for a in accounts
    }
    for c in contacts:
        first, _, last = c["name"].partition(" ")
        fake.add_contact(
            first,
            last,
            company=ids[c["account_id"]],
            email=c["email"],
            jobtitle=c["title"],
            phone=c["phone"],
        )
    return fake


@pytest.fixture(scope="session")
def _salesforce() -> Iterator[FakeSalesforce]:
    with seeded_salesforce() as fake:
        yield fake


@pytest.fixture(scope="session")
def _hubspot() -> Iterator[FakeHubSpot]:
    with seeded_hubspot() as fake:
        yield fake


@pytest.fixture
def salesforce(_salesforce: FakeSalesforce) -> Iterator[FakeSalesforce]:
    """The fake Salesforce (shared), with no requests nor trouble from earlier tests."""
    _salesforce.reset()
    yield _salesforce
    _salesforce.reset()


@pytest.fixture
def hubspot(_hubspot: FakeHubSpot) -> Iterator[FakeHubSpot]:
    """The fake HubSpot (shared), with no requests nor trouble from earlier tests."""
    _hubspot.reset()
    yield _hubspot
    _hubspot.reset()


def salesforce_settings(fake: FakeSalesforce | str, **more: Any) -> dict[str, Any]:
    """The bot's settings for the fake (or a fake's URL)."""
    return {
        "CRM": "salesforce",
        "SALESFORCE_LOGIN_URL": fake if isinstance(fake, str) else fake.url,
        "SALESFORCE_CLIENT_ID": SF_CLIENT,
        "SALESFORCE_CLIENT_SECRET": SF_SECRET,
        **tls_settings(),
        **more,
    }


def hubspot_settings(fake: FakeHubSpot | str, **more: Any) -> dict[str, Any]:
    """The bot's settings for the fake (or a fake's URL)."""
    return {
        "CRM": "hubspot",
        "HUBSPOT_ACCESS_TOKEN": HUBSPOT_TOKEN,
        "HUBSPOT_BASE_URL": fake if isinstance(fake, str) else fake.url,
        **tls_settings(),
        **more,
    }
