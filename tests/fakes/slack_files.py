"""Files people attached, for the fake Slack: each one served at its ``url_private`` to the
bot token only (anyone else is sent to a sign-in page, as Slack does), and by files.info."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)

from tests.fakes.slack_requests import SlackError

FILE_CHUNK = 256 * 1024


class FileMethods:
    """Mixed into FakeSlack: its lock, ``url`` and ``bot_token``; the files and their
    downloads are kept here."""

    _lock: Any
    url: str
    bot_token: str
    _files: dict[str, tuple[dict[str, Any], bytes]]
    _downloads: list[dict[str, Any]]

    def add_file(
        self,
        name: str,
        content: bytes,
        mimetype: str,
        *,
        filetype: str = "",
        size: int | None = None,
        check_file_info: bool = False,
    ) -> dict[str, Any]:
        """A file someone attached, as Slack's file object in their message's ``files``:
        served at its ``url_private`` to the bot token only. ``size``: what Slack says
        (default: the real size); ``check_file_info``: without its URLs, as Slack Connect
        sends it (files.info tells them)."""
        with self._lock:
            file_id = f"F{len(self._files) + 1:08d}"
            url = f"{self.url}/files-pri/{file_id}/{name}"
            file = {
                "id": file_id,
                "name": name,
                "title": name,
                "mimetype": mimetype,
                "filetype": filetype,
                "size": len(content) if size is None else size,
                "mode": "hosted",
                "file_access": "visible",
                "url_private": url,
                "url_private_download": url + "?download=1",
            }
            self._files[file_id] = (file, content)
        if check_file_info:
            hidden = ("url_private", "url_private_download")
            return {
                **{k: v for k, v in file.items() if k not in hidden},
                "file_access": "check_file_info",
            }
        return dict(file)

    @property
    def file_downloads(self) -> list[dict[str, Any]]:
        """Each request for a file's bytes: its ``id``, whether it was ``authorized`` and
        how many bytes were ``served`` before the reader stopped."""
        with self._lock:
            return [dict(d) for d in self._downloads]

    async def _serve_file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        auth = request.headers.get("authorization", "")
        with self._lock:
            found = self._files.get(file_id)
            download = {"id": file_id, "authorized": auth == f"Bearer {self.bot_token}"}
            download["served"] = 0
            self._downloads.append(download)
        if found is None or request.path_params["name"] != found[0]["name"]:
            return PlainTextResponse("Not found", status_code=404)
        if not download["authorized"]:  # as Slack does: off to the sign-in page
            return RedirectResponse(f"{self.url}/signin?redir=/files-pri/{file_id}", 302)
        content = found[1]

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(content), FILE_CHUNK):
                if await request.is_disconnected():  # the reader stopped: so does Slack
                    return
                piece = content[start : start + FILE_CHUNK]
                with self._lock:
                    download["served"] += len(piece)
                yield piece

        media = found[0]["mimetype"]
        length = {"Content-Length": str(len(content))}
        return StreamingResponse(chunks(), media_type=media, headers=length)

    async def _sign_in(self, request: Request) -> Response:
        return HTMLResponse("<html><body>Sign in to Slack</body></html>")

    def _files_info(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._files.get(str(args.get("file") or ""))
        if found is None:
            raise SlackError("file_not_found")
        return {"file": dict(found[0])}
