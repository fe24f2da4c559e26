"""What Slack sends to the bot's own endpoint, for tests: Events API callbacks, the URL
check, interactivity payloads, and the signed headers that go with them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier


def event_payload(
    event: Mapping[str, Any],
    *,
    event_id: str | None = None,
    team_id: str = "T1",
    api_app_id: str = "A1",
    bot_user_id: str = "UBOT",
    event_time: int | None = None,
    token: str = "verification-token",
) -> str:
    """The JSON text of an Events API `event_callback` wrapping `event`.

    `event_id` defaults to a fresh unique id; `event.event_ts` defaults to `event.ts`.
    """
    event = dict(event)
    if "ts" in event:
        event.setdefault("event_ts", event["ts"])
    return json.dumps(
        {
            "token": token,
            "team_id": team_id,
            "context_team_id": team_id,
            "api_app_id": api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()) if event_time is None else event_time,
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": team_id,
                    "user_id": bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }
    )


def url_verification_payload(
    challenge: str = "challenge-token", token: str = "verification-token"
) -> str:
    """The JSON text of the `url_verification` request Slack sends when the URL is configured."""
    return json.dumps({"token": token, "challenge": challenge, "type": "url_verification"})


def signed_headers(
    body: str | bytes,
    signing_secret: str,
    timestamp: int | str | None = None,
    retry_num: int | None = None,
    retry_reason: str | None = None,
    *,
    content_type: str | None = None,
) -> dict[str, str]:
    """Headers Slack would send with `body`: signature, timestamp, content type, retry info.

    `timestamp` defaults to now (pass an old one to test replay protection); the content type
    defaults to JSON for a body that looks like JSON and to form-encoded otherwise.
    """
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=ts, body=body)
    text = body.decode() if isinstance(body, bytes) else body
    if content_type is None:
        is_json = text.lstrip().startswith(("{", "["))
        content_type = "application/json" if is_json else "application/x-www-form-urlencoded"
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature or "",
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
    if retry_reason is not None:
        headers["X-Slack-Retry-Reason"] = retry_reason
    return headers


def block_actions_payload(
    action_id: str,
    value: str | None = None,
    *,
    user_id: str = "U1",
    channel_id: str = "C1",
    message_ts: str = "1700000000.000100",
    thread_ts: str | None = None,
    block_id: str = "b1",
    action_type: str = "button",
    message_text: str = "",
    trigger_id: str | None = None,
    response_url: str | None = None,
    team_id: str = "T1",
    user_team_id: str | None = None,
    api_app_id: str = "A1",
    token: str = "verification-token",
) -> str:
    """The form-encoded body (`payload=<json>`) of a `block_actions` interactivity request
    (`user_team_id`: the presser's own workspace, in a shared channel; `team_id` by default).

    body = block_actions_payload(
        "feedback_good",            # action_id
        "42",                       # value of the button (omitted when None)
        user_id="U1",               # who clicked
        channel_id="C1",
        message_ts="1700000000.000100",   # the message holding the button
        thread_ts="1700000000.000001",    # its thread, if any
        block_id="b1",
        action_type="button",
        response_url="https://hooks.slack.com/actions/T1/1/x",  # omitted when None
    )
    headers = signed_headers(body, signing_secret="secret")
    """
    action: dict[str, Any] = {
        "action_id": action_id,
        "block_id": block_id,
        "type": action_type,
        "action_ts": f"{time.time():.6f}",
    }
    if value is not None:
        action["value"] = value
    if action_type == "button":
        action["text"] = {"type": "plain_text", "text": action_id, "emoji": True}
    message: dict[str, Any] = {
        "type": "message",
        "ts": message_ts,
        "text": message_text,
        "user": "UBOT",
        "bot_id": "BBOT",
    }
    if thread_ts is not None:
        message["thread_ts"] = thread_ts
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel_id,
        "is_ephemeral": False,
    }
    if thread_ts is not None:
        container["thread_ts"] = thread_ts
    payload: dict[str, Any] = {
        "type": "block_actions",
        "token": token,
        "api_app_id": api_app_id,
        "team": {"id": team_id, "domain": "fake-workspace"},
        "user": {
            "id": user_id,
            "username": user_id.lower(),
            "name": user_id.lower(),
            "team_id": user_team_id or team_id,
        },
        "channel": {"id": channel_id, "name": "general"},
        "container": container,
        "message": message,
        "trigger_id": trigger_id or f"{int(time.time())}.1.{uuid.uuid4().hex[:16]}",
        "actions": [action],
        "state": {"values": {}},
        "is_enterprise_install": False,
    }
    if response_url is not None:
        payload["response_url"] = response_url
    return urlencode({"payload": json.dumps(payload)})
