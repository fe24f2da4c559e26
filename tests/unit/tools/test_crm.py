"""The CRM tools through the registry, on SQLite (and PostgreSQL when configured)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.messages import ToolCall
from bot.store.crm import CrmStore
from bot.tools.base import ToolRegistry
from bot.tools.crm import CrmTools
from bot.tools.crm.local import LocalCrm


@pytest.fixture
def store(example_crm: CrmStore) -> CrmStore:
    return example_crm


@pytest.fixture
def registry(store: CrmStore) -> ToolRegistry:
    registry = ToolRegistry()
    registry.add_object(CrmTools(LocalCrm(store)))
    return registry


async def call(registry: ToolRegistry, name: str, **arguments: Any) -> dict[str, Any]:
    return json.loads((await registry.run(ToolCall("call_1", name, json.dumps(arguments)))).output)


ANA = {
    "id": "c-101",
    "name": "Ana Lima",
    "email": "ana.lima@acme.example",
    "phone": "+351 21 000 1001",
    "title": "Head of Operations",
    "account_id": "acc-001",
    "account_name": "Acme Corp",
}


def test_the_tools_are_described(registry: ToolRegistry) -> None:
    assert sorted(registry.names()) == ["crm_find_contacts", "crm_get_account", "crm_log_note"]
    assert not registry.writes("crm_find_contacts") and registry.writes("crm_log_note")
    spec = registry.get("crm_find_contacts").spec  # type: ignore[union-attr]
    assert "email" in spec.description
    assert spec.parameters["properties"]["query"]["description"]


@pytest.mark.parametrize("query", ["Ana", "ana lima", "ANA", "ana.lima@acme", "ana acme"])
async def test_find_a_contact(registry: ToolRegistry, query: str) -> None:
    result = await call(registry, "crm_find_contacts", query=query)
    assert result == {"crm": "local", "contacts": [ANA], "count": 1}


async def test_find_by_company(registry: ToolRegistry) -> None:
    result = await call(registry, "crm_find_contacts", query="acme corp")
    assert [c["name"] for c in result["contacts"]] == ["Ana Lima", "Tom Becker"]


async def test_find_with_accents(registry: ToolRegistry) -> None:
    result = await call(registry, "crm_find_contacts", query="Lucía")
    assert [c["id"] for c in result["contacts"]] == ["c-201"]


async def test_nothing_found(registry: ToolRegistry) -> None:
    result = await call(registry, "crm_find_contacts", query="Zebulon")
    assert result["contacts"] == [] and result["count"] == 0
    assert "do not guess" in result["note"]


@pytest.mark.parametrize("query", ["%", "_", "a%e"])
async def test_wildcards_are_literal(registry: ToolRegistry, query: str) -> None:
    result = await call(registry, "crm_find_contacts", query=query)
    assert result["contacts"] == []


async def test_empty_query(registry: ToolRegistry) -> None:
    result = await call(registry, "crm_find_contacts", query="  ")
    assert "query is empty" in result["error"]


async def test_at_most_ten(registry: ToolRegistry, store: CrmStore, tmp_path: Path) -> None:
    contacts = tmp_path / "contacts.csv"
    rows = [f"x-{n:02},Extra Person {n},p{n}@acme.example,,,acc-001" for n in range(12)]
    contacts.write_text("id,name,email,phone,title,account_id\n" + "\n".join(rows) + "\n")
    await store.import_csv(contacts, None)
    result = await call(registry, "crm_find_contacts", query="extra person")
    assert result["count"] == 10
    assert len(result["contacts"]) == 10
    assert "more" in result


async def test_get_account(registry: ToolRegistry) -> None:
    result = await call(registry, "crm_get_account", account_id="acc-001")
    assert result == {
        "crm": "local",
        "id": "acc-001",
        "name": "Acme Corp",
        "industry": "Manufacturing",
        "tier": "Enterprise",
        "owner": "Maria Silva",
        "notes": "Key account since 2019. Renewal talks start in Q3; prefers email over calls.",
        "attributes": {"region": "EMEA", "renewal_date": "2027-03-31"},
        "contacts": [
            {
                "id": "c-101",
                "name": "Ana Lima",
                "email": "ana.lima@acme.example",
                "title": "Head of Operations",
            },
            {
                "id": "c-102",
                "name": "Tom Becker",
                "email": "tom.becker@acme.example",
                "title": "IT Manager",
            },
        ],
    }


async def test_get_account_not_found(registry: ToolRegistry) -> None:
    result = await call(registry, "crm_get_account", account_id="Acme Corp")
    assert result["error"].startswith("No CRM account has the id 'Acme Corp'.")
    assert "crm_find_contacts" in result["error"]


async def test_long_notes_are_trimmed(
    registry: ToolRegistry, store: CrmStore, tmp_path: Path
) -> None:
    accounts = tmp_path / "accounts.csv"
    accounts.write_text(f'id,name,notes\nacc-009,Big Notes Ltd,"{"n" * 50_000}"\n')
    await store.import_csv(None, accounts)
    result = await call(registry, "crm_get_account", account_id="acc-009")
    assert len(result["notes"]) == 2000
    assert result["notes"].endswith("[truncated]")
