"""The bot's own CRM tables behind the CRM tools (CRM=local, the demo): contacts and
accounts filled by ``bot crm import``, notes in ``crm_notes``."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from bot.errors import ToolError
from bot.store.crm import CrmStore
from bot.tools.crm.base import Check, NotFound, Permission

log = logging.getLogger(__name__)

UNREADABLE = "The CRM database could not be read; try again later."


class LocalCrm:
    """The CRM tools' backend on the bot's database."""

    name = "local"

    def __init__(self, store: CrmStore) -> None:
        self.store = store

    async def find_contacts(self, words: list[str], limit: int) -> list[dict[str, Any]]:
        try:
            found = await self.store.find_contacts(" ".join(words), limit=limit)
        except SQLAlchemyError as exc:
            raise _failed("find contacts", exc) from None
        return found

    async def get_account(self, account_id: str, limit: int) -> dict[str, Any] | None:
        try:
            account = await self.store.get_account(account_id[:64])
        except SQLAlchemyError as exc:
            raise _failed("read an account", exc) from None
        if account is None:
            return None
        contacts = account["contacts"]
        return {
            **account,
            "contacts": contacts[:limit],
            "contact_count": len(contacts),
        }

    async def get_contact(self, contact_id: str) -> dict[str, Any] | None:
        try:
            contact = await self.store.get_contact(contact_id[:64])
        except SQLAlchemyError as exc:
            raise _failed("read a contact", exc) from None
        return contact

    async def log_note(self, contact_id: str, text: str, marker: str) -> dict[str, Any]:
        contact = await self.get_contact(contact_id)
        if contact is None:
            raise NotFound(f"No contact has the id {contact_id[:64]!r} in the bot's CRM tables.")
        try:
            note = await self.store.add_note(contact["id"], text, marker)
        except SQLAlchemyError as exc:
            # the note and the turn's journal are in one database: a failed commit wrote nothing
            log.warning("crm_log_note: database error %s", type(exc).__name__)
            raise ToolError("The note could not be stored; try again later.") from None
        return _note(note, contact)

    async def find_note(self, contact_id: str, marker: str) -> dict[str, Any] | None:
        try:
            note = await self.store.note(marker)
        except SQLAlchemyError as exc:
            raise _failed("look for the note", exc) from None
        if note is None:
            return None
        contact = await self.get_contact(note["contact_id"])
        return _note(note, contact or {"id": note["contact_id"], "name": None})

    async def check(self) -> Check:
        try:
            counts = await self.store.counts()
        except SQLAlchemyError as exc:
            raise _failed("count its records", exc) from None
        where = "the bot's own tables: " + ", ".join(f"{n} {what}" for what, n in counts.items())
        rows = [("read contacts", "contacts"), ("read accounts", "accounts")]
        permissions = [Permission(need, True, f"{counts[what]} {what}") for need, what in rows]
        permissions.append(Permission("write notes", True, "table crm_notes"))
        return Check("local", where, permissions)

    async def close(self) -> None:
        return None  # the engines are the bot's, closed with it


def _failed(action: str, exc: SQLAlchemyError) -> ToolError:
    log.warning("crm: database error %s while trying to %s", type(exc).__name__, action)
    return ToolError(UNREADABLE)


def _note(note: dict[str, Any], contact: dict[str, Any]) -> dict[str, Any]:
    return {
        "note_id": note["id"],
        "contact": {"id": contact["id"], "name": contact.get("name")},
        "created_at": note["created_at"],
    }
