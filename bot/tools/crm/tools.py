"""The CRM tools: find contacts, read an account, log a note on a contact; the same names
and arguments whichever CRM (``CrmBackend``) is behind them. Each result says which CRM it
came from (``crm``) and carries each record's link (``url``) where the CRM has pages."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from bot.errors import ToolError
from bot.tools.crm.base import CrmBackend, NotFound, OutcomeUnknown
from bot.tools.tool import tool

log = logging.getLogger(__name__)

MAX_CONTACTS = 10
#: an account's contacts listed in one result; the rest are counted
MAX_ACCOUNT_CONTACTS = 25
#: the words of a query that are searched for
MAX_WORDS = 8
TEXT_LIMIT = 2_000
NOTE_MAX = 10_000
TRUNCATED = "… [truncated]"
#: pauses between looks for a note whose answer was lost (a CRM's search may lag a moment)
LOOK_PAUSES_S = (0.0, 1.0, 2.0)


class CrmTools:
    """The CRM tools on ``backend``; register with ``ToolRegistry.add_object``.
    ``time_limit`` (TOOL_TIMEOUT_S) bounds the looks for a note whose answer was lost."""

    def __init__(self, backend: CrmBackend, time_limit: float = 30.0) -> None:
        self.backend = backend
        self.time_limit = time_limit

    @tool(progress="Searching contacts for '{query}'")
    async def crm_find_contacts(self, query: str) -> dict[str, Any]:
        """Find CRM contacts by name, email or company (account) name; up to 10.

        Every word of the query must match, case-insensitively: "Ana", "ana@acme.com",
        "Acme", "Ana Acme". Use it before saying anything about a person or their company.

        Args:
            query: part of a name, an email address or a company name.
        """
        words = query[:200].split()[:MAX_WORDS]
        if not words:
            raise ToolError("The query is empty: give a name, an email or a company name.")
        found = await self.backend.find_contacts(words, MAX_CONTACTS + 1)
        result: dict[str, Any] = {
            "crm": self.backend.name,
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
        """Read a CRM account (company): its details, owner, notes and its contacts.

        Args:
            account_id: the account's id, as given by crm_find_contacts (account_id).
        """
        if not account_id.strip():
            raise ToolError("The account_id is empty: look the contact up with crm_find_contacts.")
        account = await self.backend.get_account(account_id, MAX_ACCOUNT_CONTACTS)
        if account is None:
            raise ToolError(
                f"No CRM account has the id {account_id[:64]!r}. Look the contact up first with "
                "crm_find_contacts and use the account_id it returns."
            )
        for key in ("notes", "description"):
            if key in account:
                account[key] = _cut(account[key], TEXT_LIMIT)
        more = account.pop("contact_count") - len(account["contacts"])
        if more > 0:
            account["more_contacts"] = more
        return {"crm": self.backend.name, **account}

    @tool(
        writes=True,
        progress="Logging a note on contact {contact_id}",
        lookup="find_logged_note",
        preview="describe_note",
    )
    async def crm_log_note(
        self, contact_id: str, text: str, *, marker: str | None = None
    ) -> dict[str, Any]:
        """Log a note on a CRM contact (its activity history), e.g. what was discussed.

        Only call this when the user asked for a note to be logged.

        Args:
            contact_id: the contact's id, as given by crm_find_contacts.
            text: the note, in plain text.
        """
        text = text.strip()
        if not text:
            raise ToolError("The note is empty; give its text.")
        if len(text) > NOTE_MAX:
            raise ToolError(f"The note has {len(text)} characters; keep it under {NOTE_MAX}.")
        marker = marker or f"bot-{secrets.token_hex(5)}"
        try:
            note = await self.backend.log_note(contact_id, text, marker)
        except NotFound as missing:
            raise ToolError(f"{missing} Look the contact up with crm_find_contacts.") from None
        except OutcomeUnknown as unknown:
            return await self._recover(contact_id, marker, unknown.reason)
        log.info("crm: note %s logged in %s", note["note_id"], self.backend.name)
        return {"crm": self.backend.name, **note}

    async def find_logged_note(self, marker: str, contact_id: str = "", **_: Any) -> dict[str, Any]:
        """The lookup of ``crm_log_note`` for a turn resumed after a crash: the note a call
        with ``marker`` wrote, found by its marker; never writes one."""
        return await self._recover(contact_id, marker, "the bot restarted")

    async def describe_note(self, contact_id: str, text: str, **_: Any) -> str:
        """The approval card's heading: where the note goes, and its first words."""
        contact = await self.backend.get_contact(contact_id)
        who = contact.get("name") if contact else None
        first = " ".join(text.split())
        first = first if len(first) <= 120 else first[:119] + "…"
        where = (
            f"{who} ({self.backend.name} contact {contact_id})"
            if who
            else (f"{self.backend.name} contact {contact_id} (not found)")
        )
        return f"Log a note on {where}: {first}"

    async def _recover(self, contact_id: str, marker: str, reason: str) -> dict[str, Any]:
        """The note's answer was lost (``reason``): find out by its marker whether it was
        written. Never writes it."""
        crm = self.backend.name
        log.warning("crm: note on %s: %s; looking for %s", contact_id, reason, marker)
        until = time.monotonic() + self.time_limit
        checked = False
        for pause in LOOK_PAUSES_S:
            if pause:
                if time.monotonic() + pause + 1.0 > until:
                    break
                await asyncio.sleep(pause)
            try:
                found = await self.backend.find_note(contact_id, marker)
            except ToolError:
                continue
            checked = True
            if found is not None:
                return {
                    "crm": crm,
                    **found,
                    "note": f"{crm}'s answer was lost ({reason}), but the note is there. It "
                    "was not sent again.",
                }
        if checked:
            raise ToolError(
                f"Logging the note in {crm} failed ({reason}) and the note ({marker}) is not "
                "there, so it was most likely not written. It was not sent again "
                "automatically; ask before trying again."
            )
        raise ToolError(
            f"Logging the note in {crm} failed ({reason}) and {crm} could not be searched to "
            f"check whether it is there. It was not sent again, to avoid a duplicate: look for "
            f"a note marked {marker} on the contact before trying again."
        )


def _cut(text: Any, limit: int) -> Any:
    if isinstance(text, str) and len(text) > limit:
        return text[: limit - len(TRUNCATED)] + TRUNCATED
    return text
