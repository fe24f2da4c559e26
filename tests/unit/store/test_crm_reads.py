"""The CRM reads behind ``bot crm list|show``, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from bot.store.crm import CrmStore


@pytest.fixture
def store(example_crm: CrmStore) -> CrmStore:
    return example_crm


async def test_accounts_by_name_with_their_number_of_contacts(store: CrmStore) -> None:
    accounts = await store.accounts()
    assert [a["id"] for a in accounts] == ["acc-001", "acc-002", "acc-003", "acc-004"]
    assert {a["contact_count"] for a in accounts} == {2}
    # every word in one of name, industry, owner; case does not matter
    assert [a["id"] for a in await store.accounts("maria SOFTWARE")] == ["acc-003"]
    assert await store.accounts("nobody") == []


async def test_contacts_match_name_email_or_account(store: CrmStore) -> None:
    assert len(await store.contacts()) == 8
    assert [c["id"] for c in await store.contacts("acme")] == ["c-101", "c-102"]
    assert [c["id"] for c in await store.contacts("ana lima")] == ["c-101"]
    assert [c["id"] for c in await store.contacts("acme", limit=1)] == ["c-101"]
    # a LIKE wildcard is a plain character
    assert await store.contacts("%") == []


async def test_a_contact_with_its_attributes_and_account(store: CrmStore) -> None:
    contact = await store.get_contact(" c-101 ")
    assert contact is not None
    assert (contact["account_name"], contact["attributes"]) == (
        "Acme Corp",
        {"preferred_language": "pt"},
    )
    assert await store.get_contact("acc-001") is None
