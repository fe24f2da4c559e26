"""The files attached to a question, read from Slack (``files:read``) for the turn that
answers it: images (PNG, JPEG, GIF, WebP) as they are, text files (plain text, Markdown,
CSV, JSON, logs, code) as text within FILE_TEXT_TOKENS, anything else named with its type
so that the model can say it cannot read it.

A file is fetched from its private URL with the bot token, only from Slack's file host or
the host the Web API is reached at (the token goes nowhere else), and never past
FILE_MAX_BYTES: a larger one, as its ``size`` says, is not fetched at all, and the read
stops as soon as more bytes come than that. A file that cannot be had becomes a note to the
model (the turn goes on); none of its bytes are kept after the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.tokens import count_text
from bot.messages import Attachment
from bot.slack.events import file_refs
from bot.slack.poster import failure

log = logging.getLogger(__name__)

#: the image types the model takes, and how each one's bytes begin
IMAGE_MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF8",
    "image/webp": b"RIFF",
}
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
        "application/csv",
    }
)
#: Slack's own names of text files (its snippets are often just "text/plain", or none)
TEXT_FILETYPES = frozenset(
    "text markdown csv tsv json yaml xml log diff sql shell python javascript typescript "
    "go rust java kotlin c cpp csharp ruby php swift html css toml ini".split()
)
#: the file hosts that may be sent the bot token (besides the Web API's own)
SLACK_FILE_HOSTS = frozenset({"files.slack.com", "files.slack-gov.com"})
#: bytes of a text file read per token of the budget left (tokens rarely run longer)
BYTES_PER_TOKEN = 16
DOWNLOAD_TIMEOUT_S = 30
CAN_READ = "only images (PNG, JPEG, GIF, WebP) and text files can be read"


class Unreadable(Exception):
    """Why a file was not read, in words for the model."""


@dataclass
class _Budget:
    tokens: int


class SlackFiles:
    """Reads a question's files with the client's token and connection pool."""

    def __init__(self, client: AsyncWebClient, max_bytes: int, text_tokens: int) -> None:
        self.client = client
        #: FILE_MAX_BYTES and FILE_TEXT_TOKENS
        self.max_bytes = max_bytes
        self.text_tokens = text_tokens
        api = urlsplit(client.base_url)
        self._api_origin = (api.scheme, api.netloc)

    async def read(self, refs: Sequence[dict[str, Any]]) -> tuple[Attachment, ...]:
        """The files (as ``bot.slack.events.file_refs`` keeps them) for the model."""
        budget = _Budget(self.text_tokens)
        return tuple([await self._one(ref, budget) for ref in refs])

    async def _one(self, ref: dict[str, Any], budget: _Budget) -> Attachment:
        name, mimetype = ref["name"], ref["mimetype"]
        kind = _kind(mimetype, ref.get("filetype") or "")
        try:
            if kind is None:
                raise Unreadable(f"this kind of file cannot be read: {CAN_READ}")
            if kind == "text" and budget.tokens <= 0:
                raise Unreadable("the question's other files used up the text allowed")
            ref = await self._located(ref)
            size = ref.get("size")
            if size is not None and size > self.max_bytes:
                raise Unreadable(f"it is larger ({_mb(size)}) than the {_mb(self.max_bytes)} limit")
            limit = self.max_bytes
            if kind == "text":
                limit = min(limit, budget.tokens * BYTES_PER_TOKEN)
            data, whole = await self._download(ref["url"], limit, kind == "text")
        except Unreadable as why:
            log.info("attached file %s (%s) not read: %s", ref["id"], mimetype, why)
            note = f"[The attached file {name!r} ({mimetype}) was not read: {why}.]"
            return Attachment(ref["id"], name, mimetype, ref.get("size") or 0, text=note)
        size = ref.get("size") or len(data)
        if kind == "image":
            if not _looks_like(mimetype, data):
                note = f"[The attached file {name!r} is not a valid {mimetype} image.]"
                return Attachment(ref["id"], name, mimetype, size, text=note)
            return Attachment(ref["id"], name, mimetype, size, image=data)
        text = self._within_budget(data, whole, budget)
        heading = f"Contents of the attached file {name!r} ({mimetype}):"
        return Attachment(ref["id"], name, mimetype, size, text=f"{heading}\n{text}")

    async def _located(self, ref: dict[str, Any]) -> dict[str, Any]:
        """``ref`` with its private URL: Slack leaves it out of some events (Slack Connect's
        ``file_access: check_file_info``), and files.info tells it."""
        if ref.get("url"):
            return ref
        try:
            info = await self.client.files_info(file=ref["id"])
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            reason = failure("files.info", exc)
            raise Unreadable(f"Slack would not say where it is ({reason})") from exc
        (found,) = file_refs([info.get("file")]) or ({"url": None},)
        if not found.get("url"):
            raise Unreadable("Slack gave no address to fetch it from")
        return {**ref, "url": found["url"], "size": found.get("size", ref.get("size"))}

    async def _download(self, url: str, limit: int, partial: bool) -> tuple[bytes, bool]:
        """The file's bytes, at most ``limit`` of them, and whether that is all of it. More
        than ``limit`` is an error unless ``partial`` (then the head is enough)."""
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc) != self._api_origin and not (
            parts.scheme == "https" and parts.hostname in SLACK_FILE_HOSTS
        ):
            raise Unreadable("its address is not Slack's")
        headers = {"Authorization": f"Bearer {self.client.token}"}
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
        session = self.client.session or aiohttp.ClientSession()
        try:
            # a redirect is Slack's sign-in page: the token lacks files:read
            async with session.get(
                url, headers=headers, allow_redirects=False, timeout=timeout
            ) as response:
                if response.status != 200:
                    raise Unreadable(f"Slack refused to hand it over (HTTP {response.status})")
                data = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    data += chunk
                    if len(data) > limit:
                        if not partial:
                            raise Unreadable(f"it is larger than the {_mb(limit)} limit")
                        return bytes(data[:limit]), False
                return bytes(data), True
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unreadable(
                f"it could not be downloaded from Slack ({type(exc).__name__})"
            ) from exc
        finally:
            if session is not self.client.session:
                await session.close()

    def _within_budget(self, data: bytes, whole: bool, budget: _Budget) -> str:
        """The text, cut to the tokens left (then noted as cut); the budget goes down."""
        text = data.decode("utf-8", errors="replace").replace("\x00", "")
        if not whole:  # the read stopped mid-file: perhaps mid-character too
            text = text.rstrip("\ufffd")
        tokens = count_text(text)
        cut = not whole
        if tokens > budget.tokens:
            text = text[: max(0, len(text) * budget.tokens // tokens - 1)]
            tokens, cut = count_text(text), True
        budget.tokens -= tokens
        if cut:
            text += (
                f"\n[The file was cut here: attached text is limited to {self.text_tokens} tokens.]"
            )
        return text


def _kind(mimetype: str, filetype: str) -> str | None:
    """image, text, or None for a file that cannot be read."""
    if mimetype in IMAGE_MAGIC:
        return "image"
    if mimetype.startswith("text/") or mimetype in TEXT_TYPES or filetype in TEXT_FILETYPES:
        return "text"
    return None


def _looks_like(mimetype: str, data: bytes) -> bool:
    if mimetype == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return data.startswith(IMAGE_MAGIC[mimetype])


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"
