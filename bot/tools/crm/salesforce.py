"""Salesforce behind the CRM tools: contacts and accounts through SOQL, a note as a
completed Task on the contact.

Every value from the model reaches SOQL through simple-salesforce's ``format_soql``: quoted
and escaped (a quote, a backslash), and inside ``LIKE`` with ``%`` and ``_`` escaped too, so
no query can change the statement's shape. Ids are checked to be Salesforce ids first. A
note's idempotency marker ends its Task's Subject, a field SOQL can filter on (a Long Text
Area such as Description cannot be), which is how ``find_note`` finds it.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Any

from simple_salesforce.api import Salesforce
from simple_salesforce.format import format_soql

from bot.config import CrmSettings
from bot.tools.crm.base import Check, NotFound, Permission, checked_id
from bot.tools.crm.salesforce_client import SalesforceConnection

#: 15 or 18 letters and digits
SALESFORCE_ID = re.compile(r"[A-Za-z0-9]{15}(?:[A-Za-z0-9]{3})?")
SUBJECT_MAX = 255
CONTACT_FIELDS = "Id, Name, Email, Phone, Title, AccountId, Account.Name"
ACCOUNT_FIELDS = (
    "Id, Name, Industry, Type, Website, Phone, Description, Owner.Name, BillingCity, BillingCountry"
)
#: what a word is matched against: every word must be part of one of them
SEARCHED = "(Name LIKE '%{0:like}%' OR Email LIKE '%{0:like}%' OR Account.Name LIKE '%{0:like}%')"


class SalesforceCrm:
    """The CRM tools' backend on a Salesforce org (see the module's docstring)."""

    name = "Salesforce"

    def __init__(self, settings: CrmSettings, time_limit: float) -> None:
        self.connection = SalesforceConnection(settings, time_limit)

    async def find_contacts(self, words: list[str], limit: int) -> list[dict[str, Any]]:
        where = " AND ".join(format_soql(SEARCHED, word) for word in words)
        soql = f"SELECT {CONTACT_FIELDS} FROM Contact WHERE {where} ORDER BY Name LIMIT {limit}"
        rows = await self._query(soql, "search contacts")
        return [self._contact(row) for row in rows]

    async def get_account(self, account_id: str, limit: int) -> dict[str, Any] | None:
        record_id = _id(account_id, "account")
        soql = format_soql(
            f"SELECT {ACCOUNT_FIELDS}, (SELECT Id, Name, Email, Title FROM Contacts "
            f"ORDER BY Name LIMIT {limit + 1}) FROM Account WHERE Id = {{}}",
            record_id,
        )
        found = await self._query(soql, f"read account {record_id}")
        if not found:
            return None
        account = found[0]
        contacts = list((account.get("Contacts") or {}).get("records") or [])
        count = len(contacts)
        if count > limit:
            count = await self._count(record_id)
        return {
            "id": account["Id"],
            "name": account.get("Name"),
            "industry": account.get("Industry"),
            "type": account.get("Type"),
            "website": account.get("Website"),
            "phone": account.get("Phone"),
            "owner": (account.get("Owner") or {}).get("Name"),
            "city": account.get("BillingCity"),
            "country": account.get("BillingCountry"),
            "description": account.get("Description"),
            "url": self.connection.record_url("Account", account["Id"]),
            "contacts": [
                {
                    "id": c["Id"],
                    "name": c.get("Name"),
                    "email": c.get("Email"),
                    "title": c.get("Title"),
                    "url": self.connection.record_url("Contact", c["Id"]),
                }
                for c in contacts[:limit]
            ],
            "contact_count": count,
        }

    async def get_contact(self, contact_id: str) -> dict[str, Any] | None:
        record_id = _id(contact_id, "contact")
        soql = format_soql(f"SELECT {CONTACT_FIELDS} FROM Contact WHERE Id = {{}}", record_id)
        found = await self._query(soql, f"read contact {record_id}")
        return self._contact(found[0]) if found else None

    async def log_note(self, contact_id: str, text: str, marker: str) -> dict[str, Any]:
        contact = await self.get_contact(contact_id)
        if contact is None:
            raise NotFound(f"No Salesforce contact has the id {contact_id[:40]!r}.")
        task = {
            "WhoId": contact["id"],
            "Subject": subject(text, marker),
            "Description": text,
            "Status": "Completed",
            "ActivityDate": datetime.now(UTC).date().isoformat(),
        }
        options = self.connection.options
        created = await asyncio.to_thread(
            self.connection.call,
            lambda sf: sf.restful("sobjects/Task/", method="POST", json=task, **options),
            action=f"log a note on contact {contact['id']}",
            write=True,
        )
        return self._note(str((created or {}).get("id")), contact)

    async def find_note(self, contact_id: str, marker: str) -> dict[str, Any] | None:
        record_id = _id(contact_id, "contact")
        soql = format_soql(
            "SELECT Id FROM Task WHERE WhoId = {} AND Subject LIKE '%{:like}' "
            "ORDER BY CreatedDate DESC LIMIT 1",
            record_id,
            f"[{marker}]",
        )
        found = await self._query(soql, "look for the note")
        if not found:
            return None
        contact = await self.get_contact(record_id)
        return self._note(found[0]["Id"], contact or {"id": record_id, "name": None})

    async def check(self) -> Check:
        def describe(sobject: str) -> dict[str, Any]:
            answer = self.connection.call(
                lambda sf: sf.restful(f"sobjects/{sobject}/", **self.connection.options),
                action=f"describe {sobject}",
            )
            return dict((answer or {}).get("objectDescribe") or {})

        contact, account, task = [
            await asyncio.to_thread(describe, name) for name in ("Contact", "Account", "Task")
        ]
        org = str(self.connection.identity.get("id", "")).rstrip("/").split("/")[-2:-1]
        where = f"org: {org[0] if org else '?'} at {self.connection.instance_url}"
        return Check(
            "Salesforce",
            f"{where} (API {self.connection.version})",
            [
                _permission("read contacts", contact, "queryable", "Contact"),
                _permission("read accounts", account, "queryable", "Account"),
                _permission("write notes", task, "createable", "Task"),
            ],
        )

    async def close(self) -> None:
        self.connection.session.close()

    async def _query(self, soql: str, action: str) -> list[dict[str, Any]]:
        options = self.connection.options

        def query(sf: Salesforce) -> dict[str, Any]:
            return dict(sf.query(soql, **options))

        answer = await asyncio.to_thread(self.connection.call, query, action=action)
        return list(answer.get("records") or [])

    async def _count(self, account_id: str) -> int:
        soql = format_soql("SELECT COUNT() FROM Contact WHERE AccountId = {}", account_id)
        options = self.connection.options
        answer = await asyncio.to_thread(
            self.connection.call,
            lambda sf: dict(sf.query(soql, **options)),
            action="count the account's contacts",
        )
        return int(answer.get("totalSize") or 0)

    def _contact(self, row: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": row["Id"],
            "name": row.get("Name"),
            "email": row.get("Email"),
            "phone": row.get("Phone"),
            "title": row.get("Title"),
            "account_id": row.get("AccountId"),
            "account_name": (row.get("Account") or {}).get("Name"),
            "url": self.connection.record_url("Contact", row["Id"]),
        }

    def _note(self, note_id: str, contact: dict[str, Any]) -> dict[str, Any]:
        return {
            "note_id": note_id,
            "url": self.connection.record_url("Task", note_id),
            "contact": {"id": contact["id"], "name": contact.get("name")},
        }


def subject(text: str, marker: str) -> str:
    """The Task's Subject: the note's first line, cut to fit, then ``[marker]``."""
    tail = f" [{marker}]"
    first = " ".join((text.strip().splitlines() or [""])[0].split())
    room = SUBJECT_MAX - len(tail)
    if len(first) > room:
        first = first[: room - 1] + "…"
    return f"{first or 'Note'}{tail}"


def _id(value: str, what: str) -> str:
    return checked_id(value, SALESFORCE_ID, "Salesforce", what, "15 or 18 letters and digits")


def _permission(need: str, describe: dict[str, Any], flag: str, sobject: str) -> Permission:
    granted = bool(describe.get(flag))
    return Permission(need, granted, f"{sobject} is {'' if granted else 'not '}{flag}")
