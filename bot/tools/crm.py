"""CRM tools: find contacts and read an account, from the bot's own database."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from bot.errors import ToolError
from bot.store.crm import CrmStore
from bot.tools.tool import tool

log = logging.getLogger(__name__)

MAX_CONTACTS = 10
#: an account's contacts listed in one result; the rest are counted
MAX_ACCOUNT_CONTACTS = 25
NOTES_LIMIT = 2_000
TRUNCATED = "… [truncated]"


class CrmTools:
    """The CRM tools; register with ``ToolRegistry.add_object(CrmTools(store))``."""

    def __init__(self, store: CrmStore) -> None:
        self.store = store

    @tool(progress="Searching contacts for '{query}'")
    async def crm_find_contacts(self, query: str) -> dict[str, Any]:
        """Find CRM contacts by name, email or company (account) name; up to 10.

        Every word of the query must match, case-insensitively: "Ana", "ana@acme.com",
        "Acme", "Ana Acme". Use it before saying anything about a person or their company.

        Args:
            query: part of a name, an email address or a company name.
        """
        if not query.strip():
            raise ToolError("The query is empty: give a name, an email or a company name.")
        try:
            found = await self.store.find_contacts(query[:200], limit=MAX_CONTACTS + 1)
        except SQLAlchemyError as exc:
            log.warning("crm_find_contacts: database error %s", type(exc).__name__)
            raise ToolError("The CRM database could not be read; try again later.") from None
        result: dict[str, Any] = {
            "contacts": found[:MAX_CONTACTS],
            "count": min(len(found), MAX_CONTACTS),
        }
        if len(found) > MAX_CONTACTS:
            result["more"] = "More contacts match; ask for a more specific query."
        if not found:
            result["note"] = (
                f"No contact matches {query[:100]!r}. Try part of the name, the email or the "
                "company; do not guess contact details."
            )
        return result

    @tool(progress="Reading account {account_id} in the CRM")
    async def crm_get_account(self, account_id: str) -> dict[str, Any]:
        """Read a CRM account (company): industry, tier, owner, notes and its contacts.

        Args:
            account_id: the account's id, as given by crm_find_contacts (account_id).
        """
        if not account_id.strip():
            raise ToolError("The account_id is empty: look the contact up with crm_find_contacts.")
        try:
            account = await self.store.get_account(account_id[:64])
        except SQLAlchemyError as exc:
            log.warning("crm_get_account: database error %s", type(exc).__name__)
            raise ToolError("The CRM database could not be read; try again later.") from None
        if account is None:
            raise ToolError(
                f"No CRM account has the id {account_id[:64]!r}. Look the contact up first with "
                "crm_find_contacts and use the account_id it returns."
            )
        notes = account.get("notes")
        if notes and len(notes) > NOTES_LIMIT:
            account["notes"] = notes[: NOTES_LIMIT - len(TRUNCATED)] + TRUNCATED
        contacts = account["contacts"]
        if len(contacts) > MAX_ACCOUNT_CONTACTS:
            account["contacts"] = contacts[:MAX_ACCOUNT_CONTACTS]
            account["more_contacts"] = len(contacts) - MAX_ACCOUNT_CONTACTS
        return account
