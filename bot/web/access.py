"""Who may use the admin app, and the headers every admin response carries.

Who may enter: a request with ``Authorization: Bearer <ADMIN_TOKEN>``, or a browser that
logged in with the token and holds the session cookie (HttpOnly, SameSite=Strict). The
cookie names a session kept in the database (bot.agent.admin_logins): logging out, or a new
ADMIN_TOKEN, ends it at once. It is also signed with the token, so a forged one is refused
without a lookup. The session's random CSRF token must be echoed by every form POST; a
Bearer request needs none, as no other site can make a browser send that header. A wrong
token counts against its address (bot.web.throttle).
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from itsdangerous import BadData, URLSafeTimedSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.agent.admin_logins import AdminLogins
from bot.web.throttle import LoginThrottle

SESSION_COOKIE = "bot_admin"

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
    #: the browser's session; None for a Bearer request
    session_id: str | None = None

    def sent_csrf(self, sent: object) -> bool:
        """Whether a form carried this session's CSRF token (or needs none)."""
        if self.csrf is None:
            return True
        return isinstance(sent, str) and hmac.compare_digest(sent.encode(), self.csrf.encode())


class Auth:
    def __init__(self, logins: AdminLogins, throttle: LoginThrottle) -> None:
        self.logins = logins
        self.throttle = throttle
        self._cookies = URLSafeTimedSerializer(logins.token, salt="bot.web.admin.session")
        self._max_age_s = int(logins.lifetime.total_seconds())

    async def try_token(self, request: Request, candidate: str, how: str) -> bool:
        """Whether ``candidate`` is ADMIN_TOKEN (see LoginThrottle.try_token)."""
        return await self.throttle.try_token(request, candidate, self.logins.token, how)

    async def identify(self, request: Request) -> Admin | None:
        presented = bearer_token(request)
        if presented is not None and await self.try_token(request, presented, "Bearer token on"):
            return Admin(csrf=None)
        session_id = self._session_of(request)
        if session_id is None:
            return None
        csrf = await self.logins.csrf_of(session_id)
        return Admin(csrf, session_id) if csrf else None

    async def start_session(self, request: Request, response: Response) -> None:
        login = await self.logins.start()
        response.set_cookie(
            SESSION_COOKIE,
            self._cookies.dumps({"session": login.session_id}),
            max_age=self._max_age_s,
            path=mount_root(request) or "/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )

    async def end_session(self, request: Request, admin: Admin, response: Response) -> None:
        if admin.session_id is not None:
            await self.logins.end(admin.session_id)
        response.delete_cookie(
            SESSION_COOKIE, path=mount_root(request) or "/", httponly=True, samesite="strict"
        )

    def _session_of(self, request: Request) -> str | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        try:
            data = self._cookies.loads(cookie, max_age=self._max_age_s)
        except BadData:
            return None
        session_id = data.get("session") if isinstance(data, dict) else None
        return session_id if isinstance(session_id, str) and session_id else None


def bearer_token(request: Request) -> str | None:
    """What ``Authorization: Bearer ...`` carries, or None without one."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def mount_root(request: Request) -> str:
    """Where the admin app is mounted ("/admin"), so links work under any prefix."""
    root_path: str = request.scope.get("root_path", "")
    return root_path.rstrip("/")


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


class Site(Protocol):
    """What the guards below need of the admin site."""

    auth: Auth

    def login_form(self, request: Request, next_path: str, status_code: int) -> Response: ...

    def message(
        self, request: Request, admin: Admin | None, text: str, status_code: int
    ) -> Response: ...


Handler = Callable[[Any, Request, Admin], Awaitable[Response]]
Guarded = Callable[[Any, Request], Awaitable[Response]]
EXPIRED_FORM = "This form has expired or did not come from this site. Reload and try again."


def page(handler: Handler) -> Guarded:
    """Pages and downloads: anyone not logged in gets the login form, with 401."""

    @functools.wraps(handler)
    async def guarded(site: Site, request: Request) -> Response:
        admin = await site.auth.identify(request)
        if admin is None:
            query = request.url.query
            here = request.url.path + (f"?{query}" if query else "")
            return site.login_form(request, next_path=here, status_code=401)
        return await handler(site, request, admin)

    return guarded


def form_post(handler: Handler) -> Guarded:
    """State changes: a logged-in admin, and the session's CSRF token in the form."""

    @functools.wraps(handler)
    async def guarded(site: Site, request: Request) -> Response:
        admin = await site.auth.identify(request)
        if admin is None:
            return site.message(request, None, "Log in first.", status_code=401)
        form = await request.form()
        if not admin.sent_csrf(form.get("csrf")):
            return site.message(request, admin, EXPIRED_FORM, status_code=403)
        return await handler(site, request, admin)

    return guarded


def api(handler: Handler) -> Guarded:
    """The JSON API: a Bearer token or a logged-in browser; a browser's change (any method
    but GET) must carry its session's CSRF token in ``X-CSRF-Token``."""

    @functools.wraps(handler)
    async def guarded(site: Site, request: Request) -> Response:
        admin = await site.auth.identify(request)
        if admin is None:
            return JSONResponse(
                {"error": "unauthorized: send Authorization: Bearer <ADMIN_TOKEN>"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        if request.method != "GET" and not admin.sent_csrf(request.headers.get("x-csrf-token")):
            return JSONResponse({"error": "missing or wrong X-CSRF-Token"}, status_code=403)
        return await handler(site, request, admin)

    return guarded
