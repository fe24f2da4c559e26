"""AdminLogins: who is logged in to the admin pages, kept in the database so that logging
out, or a new ADMIN_TOKEN, ends a session at once and in every process.

A session's id is 32 random bytes handed to the browser (in the signed cookie); the store
keeps only its SHA-256, and the ADMIN_TOKEN's, so neither table nor log opens a session.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from bot.messages import utcnow
from bot.store.admin_sessions import AdminSessionStore


@dataclass(frozen=True)
class AdminLogin:
    #: what the browser keeps (in its cookie)
    session_id: str
    #: what each of its forms must echo
    csrf: str


#: how long a login lasts
SESSION_LIFETIME = timedelta(hours=12)


class AdminLogins:
    """Every method raises StoreError when the database fails."""

    def __init__(
        self, store: AdminSessionStore, token: str, lifetime: timedelta = SESSION_LIFETIME
    ) -> None:
        self._store = store
        #: ADMIN_TOKEN: what the web compares presented tokens with and signs cookies with
        self.token = token
        self._token_key = _digest(token)
        self.lifetime = lifetime

    async def start(self) -> AdminLogin:
        login = AdminLogin(secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        expires_at = utcnow() + self.lifetime
        await self._store.add(_digest(login.session_id), self._token_key, login.csrf, expires_at)
        return login

    async def csrf_of(self, session_id: str) -> str | None:
        """The CSRF token of an open session, or None (logged out, expired, another token)."""
        return await self._store.csrf_of(_digest(session_id), self._token_key)

    async def forget_other_tokens(self) -> int:
        """At start-up: a new ADMIN_TOKEN ends every session of the old one (even if that
        token comes back later); how many ended."""
        return await self._store.remove_others(self._token_key)

    async def end(self, session_id: str) -> None:
        await self._store.remove(_digest(session_id))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
