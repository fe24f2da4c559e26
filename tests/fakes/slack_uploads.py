"""Files the bot uploads, for the fake Slack, in Slack's three steps (what slack_sdk's
``files_upload_v2`` does): files.getUploadURLExternal hands out a file id and an upload URL
(served by the fake itself), the bytes are POSTed there, and files.completeUploadExternal
shares the file, once, in a channel or a thread (a message of the bot's holding it).

The upload URL takes the bytes once, exactly as many as were announced (the URL is the
credential: Slack's takes no token); ``fail_upload_next(status)`` (tests.fakes.slack_trouble)
has it refuse the next upload. Errors that Slack's reference does not name are the fake's words.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from tests.fakes.slack_content import MAX_TEXT
from tests.fakes.slack_requests import SlackError


class UploadMethods:
    """Mixed into FakeSlack: its lock, ``url``, ``bot_user_id``, ``bot_id`` and messages;
    the uploads are kept here, by file id."""

    _lock: Any
    url: str
    bot_user_id: str
    bot_id: str
    _uploads: dict[str, dict[str, Any]]
    _upload_urls: dict[str, str]
    _upload_refusal: Callable[[], int | None]
    _messages: Any
    _next_ts: Callable[[], str]
    _require_channel: Callable[..., str]

    @property
    def uploaded_files(self) -> list[dict[str, Any]]:
        """Each file shared by files.completeUploadExternal, in order: its ``id``, ``name``,
        ``title``, ``content`` (bytes), ``channel``, ``thread_ts`` and ``initial_comment``."""
        with self._lock:
            shared = [u for u in self._uploads.values() if u["shared"]]
            keys = ("id", "name", "title", "content", "channel", "thread_ts", "initial_comment")
            return [{key: upload[key] for key in keys} for upload in shared]

    def _get_upload_url(self, args: dict[str, Any]) -> dict[str, Any]:
        filename = args.get("filename")
        if not isinstance(filename, str) or not filename:
            raise SlackError("invalid_arguments", "missing required field: filename")
        try:
            length = int(args.get("length", ""))
        except ValueError:
            raise SlackError("invalid_arguments", "length must be an integer") from None
        if length <= 0:  # Slack's answer to a length of 0
            raise SlackError("missing_argument")
        file_id = f"FU{len(self._uploads) + 1:07d}"
        key = secrets.token_urlsafe(16)
        self._upload_urls[key] = file_id
        self._uploads[file_id] = {
            "id": file_id,
            "name": filename,
            "title": filename,
            "length": length,
            "content": None,
            "shared": False,
            "channel": None,
            "thread_ts": None,
            "initial_comment": None,
        }
        return {"upload_url": f"{self.url}/upload/v1/{key}", "file_id": file_id}

    async def _receive_upload(self, request: Request) -> Response:
        body = await request.body()
        refused = self._upload_refusal()
        if refused is not None:
            return PlainTextResponse("upload refused", status_code=refused)
        with self._lock:
            file_id = self._upload_urls.get(request.path_params["key"])
            if file_id is None:  # never handed out, or used already
                return PlainTextResponse("Not found", status_code=404)
            upload = self._uploads[file_id]
            if len(body) != upload["length"]:
                return PlainTextResponse(
                    f"expected {upload['length']} bytes, got {len(body)}", status_code=400
                )
            upload["content"] = body
            del self._upload_urls[request.path_params["key"]]
        return PlainTextResponse(f"OK - {len(body)}")

    def _complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        files = args.get("files")
        if not isinstance(files, list) or not files:
            raise SlackError("invalid_arguments", "files must be a non-empty array")
        uploads = []
        for file in files:
            upload = self._uploads.get(str(file.get("id") if isinstance(file, dict) else ""))
            # unknown, its bytes never received, or completed already (this is done once)
            if upload is None or upload["content"] is None or upload["shared"]:
                raise SlackError("file_not_found")
            uploads.append((upload, file))
        channel = args.get("channel_id")
        thread_ts = args.get("thread_ts")
        comment = args.get("initial_comment")
        if thread_ts and not channel:
            raise SlackError("invalid_arguments", "thread_ts needs channel_id")
        if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_TEXT):
            raise SlackError("invalid_arguments", "initial_comment must be a short string")
        if channel:
            channel = self._require_channel(args, "channel_id")
        for upload, file in uploads:
            upload.update(
                shared=True,
                title=file.get("title") or upload["name"],
                channel=channel,
                thread_ts=thread_ts or None,
                initial_comment=comment,
            )
        if channel:  # the message that shares them
            message = {
                "type": "message",
                "ts": self._next_ts(),
                "text": comment or "",
                "user": self.bot_user_id,
                "bot_id": self.bot_id,
                "thread_ts": thread_ts or None,
                "upload": True,
                "files": [self._file_object(upload) for upload, _ in uploads],
            }
            self._messages[channel].append(message)
        return {"files": [{"id": u["id"], "title": u["title"]} for u, _ in uploads]}

    @staticmethod
    def _file_object(upload: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": upload["id"],
            "name": upload["name"],
            "title": upload["title"],
            "size": upload["length"],
            "mode": "hosted",
        }
