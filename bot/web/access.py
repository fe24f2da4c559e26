"""Who may use the admin app, and the headers every admin response carries.

Who may enter: a request with ``Authorization: Bearer <ADMIN_TOKEN>``, or a browser that
logged in with the token and holds the signed session cookie (HttpOnly, SameSite=Strict).
The cookie carries a random per-session CSRF token that every form POST must echo; a Bearer
request needs none, as no other site can make a browser send that header.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from itsdangerous import BadData, URLSafeTimedSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SESSION_COOKIE = "bot_admin"
SESSION_MAX_AGE_S = 12 * 3600

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Admin:
    #: the session's CSRF token; None for a Bearer request, which cannot be forged cross-site
    csrf: str | None

    def sent_csrf(self, sent: object) -> bool:
        """Whether a form carried this session's CSRF token (or needs none)."""
        if self.csrf is None:
            return True
        return isinstance(sent, str) and hmac.compare_digest(sent.encode(), self.csrf.encode())


class Auth:
    def __init__(self, token: str) -> None:
        self._token = token.encode()
        # keyed by the token itself: changing ADMIN_TOKEN ends every session
        self._cookies = URLSafeTimedSerializer(token, salt="bot.web.admin.session")

    def matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._token)

    def bearer(self, request: Request) -> bool:
        """Whether the request carries ``Authorization: Bearer <the token>``."""
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.matches(credentials.strip())

    def identify(self, request: Request) -> Admin | None:
        if self.bearer(request):
            return Admin(csrf=None)
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        try:
            data = self._cookies.loads(cookie, max_age=SESSION_MAX_AGE_S)
        except BadData:
            return None
        csrf = data.get("csrf") if isinstance(data, dict) else None
        return Admin(csrf) if isinstance(csrf, str) and csrf else None

    def start_session(self, request: Request, response: Response) -> None:
        response.set_cookie(
            SESSION_COOKIE,
            self._cookies.dumps({"csrf": secrets.token_urlsafe(32)}),
            max_age=SESSION_MAX_AGE_S,
            path=mount_root(request) or "/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )

    def end_session(self, request: Request, response: Response) -> None:
        response.delete_cookie(
            SESSION_COOKIE, path=mount_root(request) or "/", httponly=True, samesite="strict"
        )


def mount_root(request: Request) -> str:
    """Where the admin app is mounted ("/admin"), so links work under any prefix."""
    return request.scope.get("root_path", "").rstrip("/")


def safe_next(request: Request, target: str) -> str:
    """Only go back to a page of this app after login: never to another site."""
    root = mount_root(request)
    if target.startswith(root + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return root + "/"


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response of the app it wraps."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
