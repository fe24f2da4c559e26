"""The admin pages and JSON API, mounted at ``/admin`` when ADMIN_TOKEN is set.

Who may enter is bot.web.access's business. Stored text is rendered only through Jinja2's
autoescape, and an answer through Markdown with raw HTML off; the pages run no script at all.
The channels' own settings are bot.web.channels'.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from bot.agent.admin_logins import AdminLogins
from bot.agent.channels import Channels
from bot.agent.sessions import Sessions
from bot.channels import KEYS
from bot.documents import EXPORT_FORMATS, pretty_json, session_list
from bot.errors import StoreError
from bot.messages import SessionSummary, iso
from bot.web.access import (
    Admin,
    Auth,
    SecurityHeaders,
    api,
    form_post,
    mount_root,
    page,
    safe_next,
)
from bot.web.channels import ChannelPages
from bot.web.throttle import LoginThrottle, Throttled
from bot.web.transcript import PROBLEM_OUTCOMES, Section, disliked, transcript

SEARCH_MAX_CHARS = 200

_HERE = Path(__file__).parent


def admin_app(
    sessions: Sessions,
    logins: AdminLogins | None,
    throttle: LoginThrottle | None = None,
    channels: Channels | None = None,
) -> Starlette | None:
    """The admin app, or None when ADMIN_TOKEN is unset, ``logins`` None (then /admin stays
    unmounted: 404). With ``channels``, the channels' own settings are shown and edited."""
    if logins is None:
        return None
    site = AdminSite(sessions, Auth(logins, throttle or LoginThrottle()), channels)
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
    if channels is not None:
        pages = ChannelPages(site, channels)
        routes += [
            Route("/channels", pages.list_page),
            Route("/channels/{channel}", pages.channel_page, methods=["GET"]),
            Route("/channels/{channel}", pages.change, methods=["POST"]),
            Route("/api/channels", pages.api_list),
            Route("/api/channels/{channel}", pages.api_channel, methods=["GET", "PUT"]),
        ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders)],
        exception_handlers={Throttled: site.throttled, StoreError: site.unavailable},
    )


# -- the pages ----------------------------------------------------------------------------


class AdminSite:
    def __init__(self, sessions: Sessions, auth: Auth, channels: Channels | None = None) -> None:
        self.sessions = sessions
        self.auth = auth
        self.channels = channels

    def render(
        self,
        request: Request,
        admin: Admin | None,
        template: str,
        status_code: int = 200,
        **ctx: Any,
    ) -> Response:
        context = {
            "root": mount_root(request),
            "admin": admin,
            "csrf": admin and admin.csrf,
            "has_channels": self.channels is not None,
            **ctx,
        }
        return _templates.TemplateResponse(request, template, context, status_code=status_code)

    def message(
        self, request: Request, admin: Admin | None, text: str, status_code: int
    ) -> Response:
        return self.render(request, admin, "message.html", status_code, text=text)

    def login_form(
        self, request: Request, next_path: str, status_code: int, notice: str | None = None
    ) -> Response:
        return self.render(
            request, None, "login.html", status_code, next_path=next_path, notice=notice
        )

    async def throttled(self, request: Request, exc: Exception) -> Response:
        """429: too many wrong tokens, from this address or from everyone."""
        assert isinstance(exc, Throttled)
        whose = "from everyone" if exc.everyone else "from your address"
        text = (
            f"Too many wrong admin tokens {whose} in the last minute. "
            f"Try again in {exc.retry_after_s} seconds."
        )
        headers = {"Retry-After": str(exc.retry_after_s)}
        if _is_api(request):
            return JSONResponse({"error": text}, status_code=429, headers=headers)
        response = self.login_form(request, "", 429, notice=text)
        response.headers.update(headers)
        return response

    async def unavailable(self, request: Request, exc: Exception) -> Response:
        """503: the database did not answer (the log has why)."""
        text = "The database is not answering. Try again in a minute; the log says why."
        if _is_api(request):
            return JSONResponse({"error": text}, status_code=503)
        return self.message(request, None, text, status_code=503)

    async def login_page(self, request: Request) -> Response:
        if await self.auth.identify(request) is not None:
            return RedirectResponse(mount_root(request) + "/", status_code=303)
        return self.login_form(request, request.query_params.get("next", ""), 200)

    async def login(self, request: Request) -> Response:
        # no CSRF token here: the form is useless to anyone who does not know the token
        form = await request.form()
        token, next_path = form.get("token"), str(form.get("next") or "")
        if not isinstance(token, str) or not await self.auth.try_token(
            request, token, "login form at"
        ):
            return self.login_form(request, next_path, 401, notice="Wrong token.")
        response = RedirectResponse(safe_next(request, next_path), status_code=303)
        await self.auth.start_session(request, response)
        return response

    @form_post
    async def logout(self, request: Request, admin: Admin) -> Response:
        response = RedirectResponse(mount_root(request) + "/login", status_code=303)
        await self.auth.end_session(request, admin, response)
        return response

    @page
    async def sessions_page(self, request: Request, admin: Admin) -> Response:
        query = request.query_params
        search = query.get("q", "").strip()[:SEARCH_MAX_CHARS]
        sort = query.get("sort", "")
        sort = sort if sort in _SORTS else "last_activity"
        order = query.get("order", "")
        order = order if order in ("asc", "desc") else _SORTS[sort].default_order
        summaries = await self.sessions.summaries()
        disliked_only = query.get("feedback") == "negative"
        if disliked_only:
            summaries = [s for s in summaries if s.negative]
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
            disliked_only=disliked_only,
        )

    async def _search(self, summaries: list[SessionSummary], text: str) -> list[SessionSummary]:
        """Sessions whose channel ID or name, or any message, contains ``text``."""
        in_messages = await self.sessions.with_text(text)
        needle = text.casefold()
        return [
            s
            for s in summaries
            if s.channel_id in in_messages
            or needle in s.channel_id.casefold()
            or needle in (s.name or "").casefold()
        ]

    @page
    async def session_page(self, request: Request, admin: Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.sessions.exists(channel):
            return self.message(request, admin, "No stored session for that channel.", 404)
        messages, turns = await self.sessions.read(channel)
        shown = request.query_params.get("turns")
        shown = shown if shown in _TURN_FILTERS else "all"
        sections = [s for s in transcript(messages, turns) if _TURN_FILTERS[shown](s)]
        settings = await self.channels.values(channel) if self.channels is not None else {}
        return self.render(
            request,
            admin,
            "session.html",
            channel=channel,
            message_count=len(messages),
            turns=turns,
            problem_count=sum(turn.outcome in PROBLEM_OUTCOMES for turn in turns),
            disliked_count=sum(disliked(turn) for turn in turns),
            shown=shown,
            sections=sections,
            channel_settings=[(key, settings[key]) for key in KEYS if key in settings],
            names=await self.sessions.names(messages, turns),
            summaries=await self.sessions.memory(channel),
        )

    @page
    async def export(self, request: Request, admin: Admin) -> Response:
        channel, fmt = request.path_params["channel"], request.path_params["fmt"]
        if fmt not in EXPORT_FORMATS or not await self.sessions.exists(channel):
            return self.message(request, admin, "Nothing to export there.", 404)
        filename = f"session-{re.sub(r'[^A-Za-z0-9_.-]', '_', channel)}.{fmt}"
        return StreamingResponse(
            self.sessions.export(channel, fmt),
            media_type="application/x-ndjson" if fmt == "jsonl" else "text/csv",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    @page
    async def confirm_delete(self, request: Request, admin: Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.sessions.exists(channel):
            return self.message(request, admin, "No stored session for that channel.", 404)
        messages, turns = await self.sessions.read(channel)
        return self.render(
            request,
            admin,
            "confirm_delete.html",
            channel=channel,
            message_count=len(messages),
            turn_count=len(turns),
        )

    @form_post
    async def delete(self, request: Request, admin: Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.sessions.exists(channel):
            return self.message(request, admin, "No stored session for that channel.", 404)
        await self.sessions.delete(channel)
        target = mount_root(request) + "/?" + urlencode({"deleted": channel})
        return RedirectResponse(target, status_code=303)

    @api
    async def api_sessions(self, request: Request, admin: Admin) -> Response:
        return JSONResponse(session_list(await self.sessions.summaries()))

    @api
    async def api_session(self, request: Request, admin: Admin) -> Response:
        channel = request.path_params["channel"]
        if not await self.sessions.exists(channel):
            return JSONResponse({"error": "no stored session for that channel"}, 404)
        return JSONResponse(await self.sessions.document(channel))


#: the session page's filters of its turns (``?turns=``)
_TURN_FILTERS: dict[str, Callable[[Section], bool]] = {
    "all": lambda section: True,
    "problems": lambda section: section.is_problem,
    "negative": lambda section: section.turn is not None and disliked(section.turn),
}


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


def _is_api(request: Request) -> bool:
    return request.url.path.startswith(mount_root(request) + "/api/")


def _when(moment: datetime | None) -> str:
    if moment is None:
        return ""
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


#: CommonMark with raw HTML off: nothing the model writes becomes markup, and links that
#: would run script (javascript:, data:) stay text
_MARKDOWN = MarkdownIt("commonmark", {"html": False})


def _markdown(text: str | None) -> Markup:
    """An answer as its Markdown renders (escaped: see _MARKDOWN)."""
    return Markup(_MARKDOWN.render(text or ""))  # markdown-it escapes the text


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
        markdown=_markdown,
    )
    return env


_templates = Jinja2Templates(env=_environment())
