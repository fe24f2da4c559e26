"""What a CRM backend does for the CRM tools (``CrmBackend``), and what it may raise.

Every record a backend returns is a plain dict the model reads: a contact has ``id``,
``name``, ``email``, ``phone``, ``title``, ``account_id``, ``account_name`` and ``url`` (the
record's page in the CRM; the bot's own tables have none); an account has ``id``, ``name``,
``url``, the CRM's own fields, ``contacts`` and ``contact_count``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.errors import ToolError


class CrmBackend(Protocol):
    """One CRM: the bot's own tables, Salesforce or HubSpot. Its client is made once per
    process and closed with ``close``."""

    #: how results name the CRM: "local", "Salesforce", "HubSpot"
    name: str

    async def find_contacts(self, words: list[str], limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` contacts of which every word is part of the name, the email or
        the account's name (case-insensitive), ordered by name."""
        ...

    async def get_account(self, account_id: str, limit: int) -> dict[str, Any] | None:
        """The account with up to ``limit`` of its contacts (ordered by name) and how many
        it has (``contact_count``); None when there is no such account."""
        ...

    async def get_contact(self, contact_id: str) -> dict[str, Any] | None:
        """One contact, or None."""
        ...

    async def log_note(self, contact_id: str, text: str, marker: str) -> dict[str, Any]:
        """Write a note on the contact carrying ``marker`` where ``find_note`` can find it;
        ``NotFound`` when there is no such contact, ``OutcomeUnknown`` when it was sent but
        its answer was lost."""
        ...

    async def find_note(self, contact_id: str, marker: str) -> dict[str, Any] | None:
        """The note a ``log_note`` with ``marker`` wrote on the contact, or None."""
        ...

    async def check(self) -> Check:
        """Connect and say what the tools may do (``bot crm check``); ``CredentialsRefused``
        when the CRM refuses the configured secret or token."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Permission:
    """One thing the tools need, and whether the CRM grants it."""

    #: "read contacts", "read accounts", "write notes"
    need: str
    granted: bool
    #: what was found, in a few words
    found: str


@dataclass(frozen=True)
class Check:
    """What ``bot crm check`` prints."""

    crm: str
    #: the org or portal, in words
    where: str
    permissions: list[Permission] = field(default_factory=list)

    def lines(self) -> list[str]:
        rows = [f"CRM: {self.crm}", self.where]
        rows += [f"{p.need}: {'yes' if p.granted else 'NO'} ({p.found})" for p in self.permissions]
        return rows


class NotFound(ToolError):
    """The CRM has no such record (or does not show it to the bot)."""


class CredentialsRefused(ToolError):
    """The CRM refused the configured secret or token: an admin must fix the settings."""


class OutcomeUnknown(Exception):
    """A note was sent but its answer was lost (``reason`` says how): whether it was
    written is found out by its marker, never by sending it again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def checked_id(value: str, shape: re.Pattern[str], crm: str, what: str, looks: str) -> str:
    """``value`` stripped, when it has the ``shape`` of the CRM's ids; else a ToolError
    saying what its ids look like (``looks``)."""
    record_id = value.strip()
    if not shape.fullmatch(record_id):
        raise ToolError(
            f"{value[:40]!r} is not a {crm} {what} id ({looks}); use the id "
            "crm_find_contacts returned."
        )
    return record_id


def unreadable(crm: str, action: str, exc: Exception, write: bool) -> Exception:
    """What an answer that cannot be read means: for a write, that its outcome is unknown."""
    if write:
        return OutcomeUnknown(f"the answer was unreadable ({type(exc).__name__})")
    return ToolError(f"{crm} gave an answer the bot cannot read while trying to {action}.")
