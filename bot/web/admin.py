"""The admin pages and JSON API, mounted at ``/admin`` when ADMIN_TOKEN is set.

Who may enter: a request with ``Authorization: Bearer <ADMIN_TOKEN>``, or a browser that
logged in with the token and holds the signed session cookie (HttpOnly, SameSite=Strict).
The cookie carries a random per-session CSRF token that every form POST must echo; a Bearer
request needs none, as no other site can make a browser send that header. Stored text is
rendered only through Jinja2's autoescape, and the pages run no script at all.
"""

from __future__ import annotations

import functools
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import jinja2
from itsdangerous import BadData, URLSafeTimedSerializer
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.documents import EXPORT_FORMATS, export_lines, pretty_json, session_document, session_list
from bot.messages import Message as StoredMessage
from bot.messages import ToolCall, TurnRecord, iso
from bot.store.history import HistoryStore, SessionSummary

SESSION_COOKIE = "bot_admin"
SESSION_MAX_AGE_S = 12 * 3600
#: turns the "problems" filter shows: they failed or hit the round cap
PROBLEM_OUTCOMES = frozenset({"error", "interrupted", "truncated", "max_rounds"})
SEARCH_MAX_CHARS = 200

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

_HERE = Path(__file__).parent


class AdminServices(Protocol):
    store: HistoryStore
    settings: Any


def admin_app(services: AdminServices) -> Starlette | None:
    """The admin app, or None when ADMIN_TOKEN is unset (then /admin stays unmounted: 404)."""
    token = services.settings.ADMIN_TOKEN
    if not token:
        return None
    site = _AdminSite(services.store, _Auth(token))
    routes = [
        Route("/", site.sessions_page),
        Route("/login", site.login_page, methods=["GET"]),
        Route("/login", site.login, methods=["POST"]),
        Route("/logout", site.logout, methods=["POST"]),
        Route("/sessions/{channel}", site.session_page),
        Route("/sessions/{channel}/export.{fmt}", site.export),
        Route("/sessions/{channel}/delete", site.confirm_delete, methods=["GET"]),
        Route("/sessions/{channel}/delete", site.delete, methods=["POST"]),
        Route("/api/sessions", site.api_sessions),
        Route("/api/sessions/{channel}", site.api_session),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(_SecurityHeaders)])


# -- who is asking ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Admin:
    #: the session's CSRF token; None for a Bearer request, which cannot be forged cross-site
    csrf: str | None


class _Auth:
    def __init__(self, token: str) -> None:
        self._token = token.encode()
        # keyed by the token itself: changing ADMIN_TOKEN ends every session
        self._cookies = URLSafeTimedSerializer(token, salt="bot.web.admin.session")

    def matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._token)

    def identify(self, request: Request) -> _Admin | None:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.matches(credentials.strip()):
            return _Admin(csrf=None)
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        try:
            data = self._cookies.loads(cookie, max_age=SESSION_MAX_AGE_S)
        except BadData:
            return None
        csrf = data.get("csrf") if isinstance(data, dict) else None
        return _Admin(csrf) if isinstance(csrf, str) and csrf else None

    def start_session(self, request: Request, response: Response) -> None:
        response.set_cookie(
            SESSION_COOKIE,
            self._cookies.dumps({"csrf": secrets.token_urlsafe(32)}),
            max_age=SESSION_MAX_AGE_S,
            path=_root(request) or "/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )

    def end_session(self, request: Request, response: Response) -> None:
        response.delete_cookie(
            SESSION_COOKIE, path=_root(request) or "/", httponly=True, samesite="strict"
        )


def _csrf_ok(admin: _Admin, sent: object) -> bool:
    if admin.csrf is None:
        return True
    return isinstance(sent, str) and hmac.compare_digest(sent.encode(), admin.csrf.encode())


Handler = Callable[["_AdminSite", Request, _Admin], Awaitable[Response]]


def _page(handler: Handler) -> Callable[[_AdminSite, Request], Awaitable[Response]]:
    """Pages and downloads: anyone not logged in gets the login form, with 401."""

    @functools.wraps(handler)
    async def guarded(site: _AdminSite, request: Request) -> Response:
        admin = site.auth.identify(request)
        if admin is None:
            return site.login_form(request, next_path=_here(request), status_code=401)
        return await handler(site, request, admin)

    return guarded


def _form_post(handler: Handler) -> Callable[[_AdminSite, Request], Awaitable[Response]]:
    """State changes: a logged-in admin, and the session's CSRF token in the form."""

    @functools.wraps(handler)
    async def guarded(site: _AdminSite, request: Request) -> Response:
        admin = site.auth.identify(request)
        if admin is None:
            return site.message(request, None, "Log in first.", status_code=401)
        form = await request.form()
        if not _csrf_ok(admin, form.get("csrf")):
            text = "This form has expired or did not come from this site. Reload and try again."
            return site.message(request, admin, text, status_code=403)
        return await handler(site, request, admin)

    return guarded


def _api(handler: Handler) -> Callable[[_AdminSite, Request], Awaitable[Response]]:
    @functools.wraps(handler)
    async def guarded(site: _AdminSite, request: Request) -> Response:
        admin = site.auth.identify(request)
        if admin is None:
            return JSONResponse(
                {"error": "unauthorized: send Authorization: Bearer <ADMIN_TOKEN>"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await handler(site, request, admin)

    return guarded


# -- the pages ----------------------------------------------------------------------------


class _AdminSite:
    def __init__(self, store: HistoryStore, auth: _Auth) -> None:
        self.store = store
        self.auth = auth

    def render(
        self, request: Request, admin: _Admin | None, template: str, status_code: int = 200, **ctx
    ) -> Response:
        context = {"root": _root(request), "admin": admin, "csrf": admin and admin.csrf, **ctx}
        return _templates.TemplateResponse(request, template, context, status_code=status_code)

    def message(
        self, request: Request, admin: _Admin | None, text: str, status_code: int
    ) -> Response:
        return self.render(request, admin, "message.html", status_code, text=text)

    def login_form(
        self, request: Request, next_path: str, status_code: int, wrong: bool = False
    ) -> Response:
        return self.render(
            request, None, "login.html", status_code, next_path=next_path, wrong=wrong
        )

    async def login_page(self, request: Request) -> Response:
        if self.auth.identify(request) is not None:
            return RedirectResponse(_root(request) + "/", status_code=303)
        return self.login_form(request, request.query_params.get("next", ""), 200)

    async def login(self, request: Request) -> Response:
        # no CSRF token here: the form is useless to anyone who does not know the token
        form = await request.form()
        token, next_path = form.get("token"), str(form.get("next") or "")
        if not isinstance(token, str) or not self.auth.matches(token):
            return self.login_form(request, next_path, 401, wrong=True)
        response = RedirectResponse(_safe_next(request, next_path), status_code=303)
        self.auth.start_session(request, response)
        return response

    @_form_post
    async def logout(self, request: Request, admin: _Admin) -> Response:
        response = RedirectResponse(_root(request) + "/login", status_code=303)
        self.auth.end_session(request, response)
        return response

    @_page
    async def sessions_page(self, request: Request, admin: _Admin) -> Response:
        query = request.query_params
        search = query.get("q", "").strip()[:SEARCH_MAX_CHARS]
        sort = query.get("sort") if query.get("sort") in _SORTS else "last_activity"
        order = query.get("order") if query.get("order") in ("asc", "desc") else None
        order = order or _SORTS[sort].default_order
        summaries = await self.store.list_sessions()
        if search:
            summaries = await self._search(summaries, search)
        summaries.sort(key=_SORTS[sort].key, reverse=order == "desc")
        return self.render(
            request,
            admin,
            "sessions.html",
            sessions=summaries,
            search=search,
            sort=sort,
            order=order,
            columns=_columns(sort, order, search),
            deleted=query.get("deleted"),
        )

    async def _search(self, summaries: list[SessionSummary], text: str) -> list[SessionSummary]:
        """Sessions whose channel ID or name, or any message, contains ``text``."""
        in_messages = await self.store.channels_with_text(text)
        needle = text.casefold()
        return [
            s
            for s in summaries
            if s.channel_id in in_messages
            or needle in s.channel_id.casefold()
            or needle in (s.name or "").casefold()
        ]

    @_page
    async def session_page(self, request: Request, admin: _Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.store.has_channel(channel):
            return self.message(request, admin, "No stored session for that channel.", 404)
        messages, turns = await self.store.messages(channel), await self.store.turns(channel)
        problems_only = request.query_params.get("turns") == "problems"
        sections = [s for s in _transcript(messages, turns) if not problems_only or s.is_problem]
        return self.render(
            request,
            admin,
            "session.html",
            channel=channel,
            message_count=len(messages),
            turns=turns,
            problem_count=sum(turn.outcome in PROBLEM_OUTCOMES for turn in turns),
            problems_only=problems_only,
            sections=sections,
        )

    @_page
    async def export(self, request: Request, admin: _Admin) -> Response:
        channel, fmt = request.path_params["channel"], request.path_params["fmt"]
        if fmt not in EXPORT_FORMATS or not await self.store.has_channel(channel):
            return self.message(request, admin, "Nothing to export there.", 404)
        filename = f"session-{re.sub(r'[^A-Za-z0-9_.-]', '_', channel)}.{fmt}"
        return StreamingResponse(
            export_lines(self.store.iter_messages(channel), fmt),  # type: ignore[arg-type]
            media_type="application/x-ndjson" if fmt == "jsonl" else "text/csv",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    @_page
    async def confirm_delete(self, request: Request, admin: _Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.store.has_channel(channel):
            return self.message(request, admin, "No stored session for that channel.", 404)
        messages, turns = await self.store.messages(channel), await self.store.turns(channel)
        return self.render(
            request,
            admin,
            "confirm_delete.html",
            channel=channel,
            message_count=len(messages),
            turn_count=len(turns),
        )

    @_form_post
    async def delete(self, request: Request, admin: _Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.store.has_channel(channel):
            return self.message(request, admin, "No stored session for that channel.", 404)
        await self.store.delete_channel(channel)
        target = _root(request) + "/?" + urlencode({"deleted": channel})
        return RedirectResponse(target, status_code=303)

    @_api
    async def api_sessions(self, request: Request, admin: _Admin) -> Response:
        return JSONResponse(session_list(await self.store.list_sessions()))

    @_api
    async def api_session(self, request: Request, admin: _Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.store.has_channel(channel):
            return JSONResponse({"error": "no stored session for that channel"}, 404)
        messages, turns = await self.store.messages(channel), await self.store.turns(channel)
        return JSONResponse(session_document(channel, messages, turns))


# -- the transcript, grouped by turn -----------------------------------------------------


@dataclass
class _ToolUse:
    call: ToolCall
    result: StoredMessage | None = None

    @property
    def failed(self) -> bool:
        try:
            data = json.loads(self.result.content or "") if self.result else None
        except ValueError:
            return False
        return isinstance(data, dict) and "error" in data


@dataclass
class _Entry:
    message: StoredMessage
    tool_uses: list[_ToolUse]


@dataclass
class _Section:
    turn_id: int | None
    turn: TurnRecord | None
    entries: list[_Entry] = field(default_factory=list)

    @property
    def is_problem(self) -> bool:
        return self.turn is not None and self.turn.outcome in PROBLEM_OUTCOMES


def _transcript(messages: Sequence[StoredMessage], turns: Sequence[TurnRecord]) -> list[_Section]:
    """Messages in order, grouped by turn; each tool result is placed under its call."""
    by_id = {turn.id: turn for turn in turns}
    sections: list[_Section] = []
    waiting: dict[str, _ToolUse] = {}
    for message in messages:
        use = waiting.pop(message.tool_call_id or "", None) if message.role == "tool" else None
        if use is not None:
            use.result = message
            continue
        if not sections or sections[-1].turn_id != message.turn_id:
            sections.append(_Section(message.turn_id, by_id.get(message.turn_id)))
        uses = [_ToolUse(call) for call in message.tool_calls]
        waiting.update((use.call.id, use) for use in uses)
        sections[-1].entries.append(_Entry(message, uses))
    shown = {section.turn_id for section in sections}
    sections += [_Section(turn.id, turn) for turn in turns if turn.id not in shown]
    return sections


# -- sorting the sessions list -------------------------------------------------------------


@dataclass(frozen=True)
class _Sort:
    label: str
    key: Callable[[SessionSummary], Any]
    default_order: str
    numeric: bool


_SORTS = {
    "channel": _Sort("Channel", lambda s: s.channel_id, "asc", False),
    "messages": _Sort("Messages", lambda s: (s.messages, s.channel_id), "desc", True),
    "turns": _Sort("Turns", lambda s: (s.turns, s.channel_id), "desc", True),
    "last_activity": _Sort(
        "Last activity", lambda s: (_epoch(s.last_activity), s.channel_id), "desc", False
    ),
}


def _columns(sort: str, order: str, search: str) -> dict[str, dict[str, str]]:
    """Each sortable column's link (clicking the current one flips the order) and arrow."""
    columns = {}
    for name, spec in _SORTS.items():
        flipped = "asc" if order == "desc" else "desc"
        next_order = flipped if name == sort else spec.default_order
        params = {"sort": name, "order": next_order} | ({"q": search} if search else {})
        arrow = ("▲" if order == "asc" else "▼") if name == sort else ""
        columns[name] = {
            "label": spec.label,
            "href": "?" + urlencode(params),
            "arrow": arrow,
            "align": "num" if spec.numeric else "",
        }
    return columns


def _epoch(moment: datetime | None) -> float:
    if moment is None:
        return 0.0
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


# -- plumbing -----------------------------------------------------------------------------


def _root(request: Request) -> str:
    """Where this app is mounted ("/admin"), so links work under any prefix."""
    return request.scope.get("root_path", "").rstrip("/")


def _here(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _safe_next(request: Request, target: str) -> str:
    """Only go back to a page of this app after login: never to another site."""
    root = _root(request)
    if target.startswith(root + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return root + "/"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return ""
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _environment() -> jinja2.Environment:
    # autoescape for every template whatever its name; stored text is never marked safe
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates" / "admin"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_when,
        iso=lambda moment: iso(moment) if moment else "",
        pretty_json=pretty_json,
        path_part=lambda text: quote(text, safe=""),
    )
    return env


_templates = Jinja2Templates(env=_environment())


class _SecurityHeaders:
    """Adds SECURITY_HEADERS to every response of the admin app."""

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
