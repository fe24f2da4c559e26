"""How the fake Slack reads a Web API request (its token and arguments, from the query
string, a JSON body or a form) and answers an error, as Slack does."""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request

# Arguments the SDK may send as JSON text inside a form-encoded body.
_JSON_ARGS = ("blocks", "attachments", "prompts", "metadata", "chunks", "unfurl_media", "files")


class SlackError(Exception):
    """A Slack error answer: ``{"ok": false, "error": ...}``, its details as Slack's
    ``[ERROR]`` messages."""

    def __init__(self, error: str, *details: str):
        super().__init__(error)
        self.error = error
        self.details = details

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": False, "error": self.error}
        if self.details:
            body["response_metadata"] = {"messages": [f"[ERROR] {d}" for d in self.details]}
        return body


async def read_request(request: Request) -> tuple[str | None, dict[str, Any], str | None]:
    """(token, args, parse error) from query string, JSON or form body, like Slack reads them."""
    args: dict[str, Any] = dict(request.query_params)
    content_type = request.headers.get("content-type", "").lower()
    raw = await request.body()
    if raw:
        if content_type.startswith("application/json"):
            try:
                body = json.loads(raw)
            except ValueError:
                return None, args, "invalid_json"
            if not isinstance(body, dict):
                return None, args, "invalid_json"
            args.update(body)
        elif content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.form()
            for key, value in form.multi_items():
                args[key] = f"<file {value.filename}>" if isinstance(value, UploadFile) else value
        else:
            return None, args, "invalid_form_data"
    for key in _JSON_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            try:
                args[key] = json.loads(value)
            except ValueError:
                return None, args, f"invalid_{key}_format"
    token = None
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        token = auth[7:].strip() or None
    form_token = args.pop("token", None)
    token = token or (str(form_token) if form_token else None)
    return token, args, None
