"""What a request to POST /slack/events (HTTP mode) must pass before Bolt sees it.

In this order, so that a stranger's request costs little and leaves one log line at most:

1. its size: a Content-Length over ``MAX_BODY_BYTES`` is refused unread (413), and a body
   streamed without one is read no further than that;
2. Slack's signature over the raw bytes, with a timestamp that is a number no more than
   five minutes off (401). Nothing is decoded or parsed before this;
3. only then the body is read as Slack sends it (JSON, or a form carrying ``payload``); a
   signed one the bot does not handle (not an object, or an event whose fields are not
   what Slack sends: bot.slack.shapes.malformed) is acknowledged with 200 and dropped, so
   that Slack does not send it again.

The refusal's log line names the method, the path, the size and the reason; never the body.

In Socket Mode (``CheckedSocketModeHandler``) only the last step applies: an envelope the
bot does not handle is acknowledged before Bolt reads it (Bolt's own reading of it may
raise, and then no ack goes out and Slack sends it again).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.starlette.async_handler import to_starlette_response
from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_bolt.request.internals import parse_body
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from bot.slack.shapes import malformed

log = logging.getLogger(__name__)

#: Slack's own requests are a few KB; a message is at most 40,000 characters
MAX_BODY_BYTES = 1024 * 1024
#: Slack's rule for replays: a request signed more than five minutes ago is refused
MAX_CLOCK_SKEW_S = 300
#: a Unix time in seconds has 10 digits until the year 2286
_TIMESTAMP_DIGITS = 12


async def handle(request: Request, app: AsyncApp, secret: bytes) -> Response:
    """POST /slack/events: refused, acknowledged unread (a signed body the bot cannot
    use: 200, so that Slack does not send it again), or dispatched to Bolt."""
    try:
        body = await signed_body(request, secret)
    except Refused as refused:
        return Response(status_code=refused.status)
    # the media type without its parameters, exactly as Bolt reads it
    content_type = request.headers.get("content-type", "").split(";")[0] or None
    payload = payload_of(body, content_type)
    problem = "not a JSON object nor a form carrying one" if payload is None else malformed(payload)
    if problem is not None:
        log.warning(
            "acknowledged a signed request to %s (%d bytes) that the bot does not handle, "
            "and did nothing: %s",
            request.url.path,
            len(body),
            problem,
        )
        return Response(status_code=200)
    # decoded, it parses as above: Bolt parses it again into its own request. Bolt keeps the
    # last of a repeated name, as these dicts do.
    headers: dict[str, str | Sequence[str]] = dict(request.headers.items())
    bolt_request = AsyncBoltRequest(
        body=body.decode("utf-8"), query=dict(request.query_params.items()), headers=headers
    )
    return to_starlette_response(await app.async_dispatch(bolt_request))


class CheckedSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, after bot.slack.shapes.malformed has let the envelope by."""

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]  # Bolt's aiohttp handler narrows the client so too
        # the SDK has made the payload a dict (or refused the envelope)
        problem = malformed(req.payload)
        if problem is None:
            await super().handle(client, req)
            return
        log.warning("acknowledged a Socket Mode envelope the bot does not handle: %s", problem)
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))


@dataclass(frozen=True)
class Refused(Exception):
    """The request is answered ``status`` without going further."""

    status: int
    reason: str
    #: how much of the body was read before it was refused, when that is what counts
    size: int | None = None


async def signed_body(request: Request, secret: bytes) -> bytes:
    """The request's body, once its size and signature passed; else ``Refused`` (logged)."""
    declared = request.headers.get("content-length", "")
    size = int(declared) if declared.isascii() and declared.isdigit() else 0
    try:
        if size > MAX_BODY_BYTES:
            raise Refused(413, f"body over {MAX_BODY_BYTES} bytes")
        body = await _read_at_most(request, MAX_BODY_BYTES)
        size = len(body)
        _check_signature(request.headers, body, secret)
    except Refused as refused:
        log.warning(
            "refused %s %s (%d bytes) with %d: %s",
            request.method,
            request.url.path,
            size if refused.size is None else refused.size,
            refused.status,
            refused.reason,
        )
        raise
    return body


def payload_of(body: bytes, content_type: str | None) -> dict[str, Any] | None:
    """A signed body as Bolt reads it (JSON, or a form whose ``payload`` is JSON), or None
    when it is not text or not an object."""
    try:
        # typed a dict, but JSON may be any value
        parsed: object = parse_body(body.decode("utf-8"), content_type)
    except ValueError:  # not UTF-8, not JSON
        return None
    return parsed if isinstance(parsed, dict) else None


async def _read_at_most(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(413, f"body over {limit} bytes (streamed; read no further)", size)
            chunks.append(chunk)
    except ClientDisconnect:  # nobody is left to answer
        raise Refused(400, "the client went away before the end of its body", size) from None
    return b"".join(chunks)


def _check_signature(headers: Mapping[str, str], body: bytes, secret: bytes) -> None:
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= _TIMESTAMP_DIGITS):
        raise Refused(401, "no valid X-Slack-Request-Timestamp")
    if abs(time.time() - int(timestamp)) > MAX_CLOCK_SKEW_S:
        raise Refused(401, "X-Slack-Request-Timestamp more than 5 minutes off")
    # Slack's v0 scheme over the raw bytes (slack_sdk's SignatureVerifier decodes them as
    # UTF-8 first, and raises on a body that is not)
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode(errors="replace")):
        raise Refused(401, "the Slack signature does not match")
