"""The admin pages and JSON API of each channel's own settings: ``/admin/channels`` lists
them, ``/admin/channels/{id}`` shows one with its changes (who, when) and edits it;
``/admin/api/channels[/{id}]`` reads them and ``PUT`` changes them (a null value unsets).
Every change is checked as ``bot channels set`` checks it, and recorded as the admin's.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from bot.agent.channels import Channels
from bot.channels import BY_ADMIN, KEYS, SWITCHES, BadChannelSetting
from bot.web.access import Admin, Auth, api, form_post, mount_root, page

if TYPE_CHECKING:  # the site imports these pages to mount them
    from bot.web.admin import AdminSite

CHANNEL_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
NOT_A_CHANNEL = "That is not a channel ID (e.g. C0123456789)."


class ChannelPages:
    """The channel settings' routes, rendered by the admin site they belong to."""

    def __init__(self, site: AdminSite, channels: Channels) -> None:
        self.site = site
        self.channels = channels

    @property
    def auth(self) -> Auth:
        return self.site.auth

    def login_form(self, request: Request, next_path: str, status_code: int) -> Response:
        return self.site.login_form(request, next_path, status_code)

    def message(
        self, request: Request, admin: Admin | None, text: str, status_code: int
    ) -> Response:
        return self.site.message(request, admin, text, status_code)

    @page
    async def list_page(self, request: Request, admin: Admin) -> Response:
        wanted = request.query_params.get("channel", "").strip()
        if wanted:
            if not CHANNEL_ID.match(wanted):
                return self.message(request, admin, NOT_A_CHANNEL, 400)
            return RedirectResponse(_url(request, wanted), status_code=303)
        documents = await self.channels.documents()
        return self.site.render(request, admin, "channels.html", channels=documents, keys=KEYS)

    @page
    async def channel_page(self, request: Request, admin: Admin) -> Response:
        channel = request.path_params["channel"]
        if not CHANNEL_ID.match(channel):
            return self.message(request, admin, NOT_A_CHANNEL, 404)
        return await self._edit_form(request, admin, channel)

    @form_post
    async def change(self, request: Request, admin: Admin) -> Response:
        channel = request.path_params["channel"]
        if not CHANNEL_ID.match(channel):
            return self.message(request, admin, NOT_A_CHANNEL, 404)
        form = await request.form()
        current = await self.channels.values(channel)
        changes: dict[str, object] = {}
        for key in KEYS:
            sent = form.get(key)
            text = sent.strip() if isinstance(sent, str) else ""
            value = text or None  # an empty field (or "default") unsets the key
            if key in SWITCHES and text == "default":
                value = None
            if value != current.get(key):
                changes[key] = value
        try:
            changed = await self.channels.change(channel, changes, BY_ADMIN)
        except BadChannelSetting as exc:
            sent_values = {k: str(form.get(k) or "") for k in KEYS}
            return await self._edit_form(
                request, admin, channel, error=str(exc), shown=sent_values, status_code=400
            )
        saved = "Saved." if changes else "Nothing changed."
        return await self._edit_form(
            request, admin, channel, notice=saved, warnings=changed.warnings
        )

    async def _edit_form(
        self,
        request: Request,
        admin: Admin,
        channel: str,
        *,
        error: str | None = None,
        notice: str | None = None,
        warnings: list[str] | None = None,
        shown: dict[str, str] | None = None,
        status_code: int = 200,
    ) -> Response:
        values = await self.channels.values(channel)
        return self.site.render(
            request,
            admin,
            "channel.html",
            status_code,
            channel=channel,
            keys=KEYS,
            switches=SWITCHES,
            values=shown if shown is not None else values,
            changes=await self.channels.changes(channel),
            error=error,
            notice=notice,
            warnings=warnings or [],
        )

    @api
    async def api_list(self, request: Request, admin: Admin) -> Response:
        return JSONResponse(await self.channels.documents())

    @api
    async def api_channel(self, request: Request, admin: Admin) -> Response:
        channel = request.path_params["channel"]
        if not CHANNEL_ID.match(channel):
            return JSONResponse({"error": NOT_A_CHANNEL}, 404)
        if request.method == "PUT":
            try:
                changes = json.loads(await request.body())
            except ValueError:
                return JSONResponse({"error": "the body must be a JSON object of keys"}, 400)
            if not isinstance(changes, dict):
                return JSONResponse({"error": "the body must be a JSON object of keys"}, 400)
            try:
                changed = await self.channels.change(channel, changes, BY_ADMIN)
            except BadChannelSetting as exc:
                return JSONResponse({"error": str(exc)}, 400)
            document = await self.channels.document(channel)
            return JSONResponse({**document, "warnings": changed.warnings})
        return JSONResponse(await self.channels.document(channel))


def _url(request: Request, channel: str) -> str:
    return f"{mount_root(request)}/channels/{channel}"
