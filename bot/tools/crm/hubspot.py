"""HubSpot behind the CRM tools: contacts through the CRM search, their companies through
associations, a note associated with the contact.

HubSpot's search takes filters, not free text: the query's longest word is searched for in
first name, last name, email and the contact's company field (one filter group each,
within the documented limits of 5 groups, 6 filters a group, 18 in all), and the other
words are then matched here against the same fields and the associated company's name.
A ``*`` in the query is dropped (HubSpot would read it as a wildcard); everything else is
sent as JSON, where no character changes the search's shape.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

from bot.config import CrmSettings
from bot.tools.crm.base import Check, NotFound, Permission, checked_id
from bot.tools.crm.hubspot_client import HubSpotConnection

HUBSPOT_ID = re.compile(r"[0-9]{1,20}")
#: contacts the search returns for the words to be matched against here (HubSpot allows 200)
SEARCH_LIMIT = 100
SEARCHED = ("firstname", "lastname", "email", "company")
CONTACT_PROPERTIES = ["firstname", "lastname", "email", "phone", "jobtitle", "company"]
COMPANY_PROPERTIES = [
    "name",
    "domain",
    "industry",
    "type",
    "phone",
    "city",
    "country",
    "description",
    "lifecyclestage",
]
#: HubSpot's association type of a note to a contact
NOTE_TO_CONTACT = 202
#: HubSpot's object type ids, as record pages name them
CONTACT_TYPE, COMPANY_TYPE = "0-1", "0-2"
SCOPES = {
    "read contacts": "crm.objects.contacts.read",
    "read companies": "crm.objects.companies.read",
    "write notes": "crm.objects.contacts.write",
}


class HubSpotCrm:
    """The CRM tools' backend on a HubSpot portal (see the module's docstring)."""

    name = "HubSpot"

    def __init__(self, settings: CrmSettings, time_limit: float) -> None:
        self.hubspot = HubSpotConnection(settings, time_limit)
        #: (portal id, UI domain) for record links, read once per process
        self._portal: tuple[str, str] | None = None

    async def find_contacts(self, words: list[str], limit: int) -> list[dict[str, Any]]:
        words = [w for w in (word.replace("*", "") for word in words) if w]
        if not words:
            return []
        longest = max(words, key=len)
        body = {
            "filterGroups": [
                {
                    "filters": [
                        {"propertyName": p, "operator": "CONTAINS_TOKEN", "value": f"*{longest}*"}
                    ]
                }
                for p in SEARCHED
            ],
            "properties": CONTACT_PROPERTIES,
            "sorts": [{"propertyName": "lastname", "direction": "ASCENDING"}],
            "limit": SEARCH_LIMIT,
        }
        answer = await self.hubspot.request(
            "POST", "/crm/v3/objects/contacts/search", json=body, action="search contacts"
        )
        rows = answer.get("results") or []
        found = [self._contact(row) for row in rows]
        await self._add_companies(found)
        lowered = [w.lower() for w in words]
        own = [(row.get("properties") or {}).get("company") for row in rows]
        matching = [c for c, o in zip(found, own, strict=True) if _matches(c, o, lowered)]
        matching.sort(key=lambda c: ((c["name"] or "").lower(), c["id"]))
        return matching[:limit]

    async def get_account(self, account_id: str, limit: int) -> dict[str, Any] | None:
        record_id = _id(account_id, "company")
        try:
            company = await self.hubspot.request(
                "GET",
                f"/crm/v3/objects/companies/{record_id}",
                params={"properties": ",".join(COMPANY_PROPERTIES), "associations": "contacts"},
                action=f"read company {record_id}",
            )
        except NotFound:
            return None
        linked = ((company.get("associations") or {}).get("contacts") or {}).get("results") or []
        ids = list(dict.fromkeys(str(link["id"]) for link in linked))
        contacts = await self._contacts(ids[:limit]) if ids else []
        contacts.sort(key=lambda c: ((c["name"] or "").lower(), c["id"]))
        properties = company.get("properties") or {}
        return {
            "id": str(company["id"]),
            "name": properties.get("name"),
            **{key: properties.get(key) for key in COMPANY_PROPERTIES[1:]},
            "url": await self._url(COMPANY_TYPE, str(company["id"])),
            "contacts": [
                {key: c[key] for key in ("id", "name", "email", "title", "url")} for c in contacts
            ],
            "contact_count": len(ids),
        }

    async def get_contact(self, contact_id: str) -> dict[str, Any] | None:
        record_id = _id(contact_id, "contact")
        try:
            row = await self.hubspot.request(
                "GET",
                f"/crm/v3/objects/contacts/{record_id}",
                params={"properties": ",".join(CONTACT_PROPERTIES)},
                action=f"read contact {record_id}",
            )
        except NotFound:
            return None
        (contact,) = await self._with_urls([self._contact(row)])
        return contact

    async def log_note(self, contact_id: str, text: str, marker: str) -> dict[str, Any]:
        contact = await self.get_contact(contact_id)
        if contact is None:
            raise NotFound(f"No HubSpot contact has the id {contact_id[:40]!r}.")
        body = {
            "properties": {
                "hs_timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "hs_note_body": note_body(text, marker),
            },
            "associations": [
                {
                    "to": {"id": contact["id"]},
                    "types": [
                        {
                            "associationCategory": "HUBSPOT_DEFINED",
                            "associationTypeId": NOTE_TO_CONTACT,
                        }
                    ],
                }
            ],
        }
        created = await self.hubspot.request(
            "POST",
            "/crm/v3/objects/notes",
            json=body,
            action=f"log a note on contact {contact['id']}",
            write=True,
        )
        return _note(str(created.get("id")), contact)

    async def find_note(self, contact_id: str, marker: str) -> dict[str, Any] | None:
        record_id = _id(contact_id, "contact")
        filters = [
            {"propertyName": "associations.contact", "operator": "EQ", "value": record_id},
            {"propertyName": "hs_note_body", "operator": "CONTAINS_TOKEN", "value": marker},
        ]
        answer = await self.hubspot.request(
            "POST",
            "/crm/v3/objects/notes/search",
            json={
                "filterGroups": [{"filters": filters}],
                "properties": ["hs_note_body"],
                "limit": 10,
            },
            action="look for the note",
        )
        for row in answer.get("results") or []:
            if marker in str((row.get("properties") or {}).get("hs_note_body") or ""):
                contact = await self.get_contact(record_id)
                return _note(
                    str(row["id"]), contact or {"id": record_id, "name": None, "url": None}
                )
        return None

    async def check(self) -> Check:
        info = await self.hubspot.request(
            "POST",
            "/oauth/v2/private-apps/get/access-token-info",
            json={"tokenKey": self.hubspot.token},
            action="read the access token's scopes",
        )
        portal, domain = await self._portal_of()
        scopes = set(info.get("scopes") or [])
        return Check(
            "HubSpot",
            f"portal: {portal} ({domain})",
            [
                Permission(
                    need,
                    scope in scopes,
                    f"scope {scope} {'' if scope in scopes else 'not '}granted",
                )
                for need, scope in SCOPES.items()
            ],
        )

    async def close(self) -> None:
        await self.hubspot.close()

    async def _add_companies(self, contacts: list[dict[str, Any]]) -> None:
        """Each contact's company (its primary association, else its first) and its name."""
        if not contacts:
            return
        links = await self.hubspot.request(
            "POST",
            "/crm/v4/associations/contacts/companies/batch/read",
            json={"inputs": [{"id": c["id"]} for c in contacts]},
            action="read the contacts' companies",
        )
        company_of = {}
        for result in links.get("results") or []:
            targets = result.get("to") or []
            primary = [
                t
                for t in targets
                if any(a.get("typeId") == 1 for a in t.get("associationTypes") or [])
            ]
            if targets:
                company_of[str(result["from"]["id"])] = str((primary or targets)[0]["toObjectId"])
        names = {}
        if company_of:
            read = await self.hubspot.request(
                "POST",
                "/crm/v3/objects/companies/batch/read",
                json={
                    "inputs": [{"id": i} for i in set(company_of.values())],
                    "properties": ["name"],
                },
                action="read the contacts' companies",
            )
            names = {
                str(r["id"]): (r.get("properties") or {}).get("name")
                for r in read.get("results") or []
            }
        for contact in contacts:
            contact["account_id"] = company_of.get(contact["id"])
            contact["account_name"] = names.get(contact["account_id"] or "")
        await self._with_urls(contacts)

    async def _contacts(self, ids: list[str]) -> list[dict[str, Any]]:
        read = await self.hubspot.request(
            "POST",
            "/crm/v3/objects/contacts/batch/read",
            json={"inputs": [{"id": i} for i in ids], "properties": CONTACT_PROPERTIES},
            action="read the company's contacts",
        )
        return await self._with_urls([self._contact(row) for row in read.get("results") or []])

    async def _with_urls(self, contacts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for contact in contacts:
            contact["url"] = await self._url(CONTACT_TYPE, contact["id"])
        return contacts

    async def _url(self, object_type: str, record_id: str) -> str:
        """The record's page: https://{uiDomain}/contacts/{portalId}/record/{type}/{id}."""
        portal, domain = await self._portal_of()
        return f"https://{domain}/contacts/{portal}/record/{object_type}/{record_id}"

    async def _portal_of(self) -> tuple[str, str]:
        if self._portal is None:
            details = await self.hubspot.request(
                "GET", "/account-info/v3/details", action="read the portal's details"
            )
            self._portal = (
                str(details.get("portalId")),
                str(details.get("uiDomain") or "app.hubspot.com"),
            )
        return self._portal

    def _contact(self, row: dict[str, Any]) -> dict[str, Any]:
        p = row.get("properties") or {}
        name = " ".join(filter(None, (p.get("firstname"), p.get("lastname")))) or None
        return {
            "id": str(row["id"]),
            "name": name,
            "email": p.get("email"),
            "phone": p.get("phone"),
            "title": p.get("jobtitle"),
            "account_id": None,
            "account_name": None,
            "url": None,
        }


def note_body(text: str, marker: str) -> str:
    """The note's HTML: the text, escaped, its lines kept, then the marker as a word of its own."""
    lines = "<br>".join(html.escape(line) for line in text.strip().splitlines())
    return f"<p>{lines}</p><p>ref {marker}</p>"


def _matches(contact: dict[str, Any], company: str | None, words: list[str]) -> bool:
    """Every word is part of the name, the email, the contact's company field or the
    associated company's name."""
    fields = [(v or "").lower() for v in (contact["name"], contact["email"], company)]
    fields.append((contact["account_name"] or "").lower())
    return all(any(word in field for field in fields) for word in words)


def _note(note_id: str, contact: dict[str, Any]) -> dict[str, Any]:
    return {
        "note_id": note_id,
        "url": contact.get("url"),
        "contact": {"id": contact["id"], "name": contact.get("name")},
    }


def _id(value: str, what: str) -> str:
    return checked_id(value, HUBSPOT_ID, "HubSpot", what, "digits")
