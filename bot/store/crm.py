"""CRM records (accounts, their contacts, notes on contacts) in the bot's own database: the
reads and the note of the CRM tools with CRM=local, the reads of ``bot crm list|show``, and
the CSV import (in bot.store.crm_import)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from bot.store.crm_import import CrmImportError, ImportSummary, import_csv
from bot.store.db import Engines
from bot.store.models import AccountRow, ContactRow, NoteRow

__all__ = ["CrmImportError", "CrmStore", "ImportSummary"]


class CrmStore:
    """Reads and imports CRM records; works on SQLite and PostgreSQL.

    A ``query`` matches a record when every one of its words is part of one of the record's
    searched fields (case-insensitive): a contact's name, email or account name; an account's
    name, industry or owner. An empty query matches every record."""

    def __init__(self, engines: Engines | AsyncEngine) -> None:
        engines = Engines.of(engines)
        self._writes = async_sessionmaker(engines.writes, expire_on_commit=False)
        self._reads = async_sessionmaker(engines.reads, expire_on_commit=False)

    async def find_contacts(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Up to ``limit`` contacts matching ``query``, ordered by name; none for no words."""
        if not query.split():
            return []
        return await self.contacts(query, max(1, limit))

    async def contacts(self, query: str = "", limit: int | None = None) -> list[dict[str, Any]]:
        """The contacts matching ``query``, ordered by name, each with its account's name."""
        fields = (ContactRow.name, ContactRow.email, AccountRow.name)
        statement = (
            select(ContactRow, AccountRow.name)
            .outerjoin(AccountRow, AccountRow.id == ContactRow.account_id)
            .where(*_every_word(query, fields))
            .order_by(ContactRow.name, ContactRow.id)
            .limit(limit)
        )
        async with self._reads() as session:
            rows = (await session.execute(statement)).all()
        return [_contact(contact, name) for contact, name in rows]

    async def accounts(self, query: str = "", limit: int | None = None) -> list[dict[str, Any]]:
        """The accounts matching ``query``, ordered by name, each with its count of contacts."""
        contacts = (
            select(func.count(ContactRow.id))
            .where(ContactRow.account_id == AccountRow.id)
            .scalar_subquery()
        )
        fields = (AccountRow.name, AccountRow.industry, AccountRow.owner)
        statement = (
            select(AccountRow, contacts)
            .where(*_every_word(query, fields))
            .order_by(AccountRow.name, AccountRow.id)
            .limit(limit)
        )
        async with self._reads() as session:
            rows = (await session.execute(statement)).all()
        return [{**_account(account), "contact_count": count} for account, count in rows]

    async def get_contact(self, contact_id: str) -> dict[str, Any] | None:
        """The contact with its attributes and its account's name, or None."""
        async with self._reads() as session:
            contact = await session.get(ContactRow, contact_id.strip())
            if contact is None:
                return None
            account_id = contact.account_id
            account = await session.get(AccountRow, account_id) if account_id else None
        found = _contact(contact, account.name if account else None)
        return {**found, "attributes": contact.attributes or {}}

    async def get_account(self, account_id: str) -> dict[str, Any] | None:
        """The account with its contacts (ordered by name), or None."""
        async with self._reads() as session:
            account = await session.get(AccountRow, account_id.strip())
            if account is None:
                return None
            contacts = (
                await session.scalars(
                    select(ContactRow)
                    .where(ContactRow.account_id == account.id)
                    .order_by(ContactRow.name, ContactRow.id)
                )
            ).all()
        return {
            **_account(account),
            "contacts": [
                {"id": c.id, "name": c.name, "email": c.email, "title": c.title} for c in contacts
            ],
        }

    async def add_note(self, contact_id: str, text: str, marker: str) -> dict[str, Any]:
        """Store a note on the contact; a second call with the same ``marker`` stores nothing
        and returns the first one's note."""
        try:
            async with self._writes.begin() as session:
                row = NoteRow(contact_id=contact_id, text=text, marker=marker)
                session.add(row)
        except IntegrityError:
            found = await self.note(marker)
            if found is None:
                raise
            return found
        return _note(row)

    async def note(self, marker: str) -> dict[str, Any] | None:
        """The note a call with ``marker`` stored, or None."""
        async with self._reads() as session:
            row = await session.scalar(select(NoteRow).where(NoteRow.marker == marker))
        return _note(row) if row is not None else None

    async def counts(self) -> dict[str, int]:
        """How many contacts, accounts and notes the tables hold."""
        async with self._reads() as session:
            return {
                name: await session.scalar(select(func.count()).select_from(row)) or 0
                for name, row in (
                    ("contacts", ContactRow),
                    ("accounts", AccountRow),
                    ("notes", NoteRow),
                )
            }

    async def import_csv(
        self, contacts: Path | None = None, accounts: Path | None = None
    ) -> ImportSummary:
        """Upsert both files by id in one transaction, or raise CrmImportError and change
        nothing (see bot.store.crm_import)."""
        return await import_csv(self._writes, contacts, accounts)


def _every_word(query: str, fields: Sequence[Any]) -> list[ColumnElement[bool]]:
    return [
        or_(*(func.lower(f).contains(word, autoescape=True) for f in fields))
        for word in query.lower().split()
    ]


def _contact(contact: ContactRow, account_name: str | None) -> dict[str, Any]:
    return {
        "id": contact.id,
        "name": contact.name,
        "email": contact.email,
        "phone": contact.phone,
        "title": contact.title,
        "account_id": contact.account_id,
        "account_name": account_name,
    }


def _account(account: AccountRow) -> dict[str, Any]:
    return {
        "id": account.id,
        "name": account.name,
        "industry": account.industry,
        "tier": account.tier,
        "owner": account.owner,
        "notes": account.notes,
        "attributes": account.attributes or {},
    }


def _note(row: NoteRow) -> dict[str, Any]:
    return {"id": row.id, "contact_id": row.contact_id, "created_at": row.created_at.isoformat()}
