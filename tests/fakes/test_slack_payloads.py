"""What the fake Slack's builders make of the requests Slack sends to the bot: signed
events, interactivity payloads and the URL check."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier

from tests.fakes.slack_server import (
    block_actions_payload,
    event_payload,
    signed_headers,
    url_verification_payload,
)

TS = re.compile(r"^\d{10}\.\d{6}$")


# --------------------------------------------------------------------------------------------
# Requests Slack sends to the bot


def test_signed_event_verifies() -> None:
    body = event_payload(
        event={
            "type": "app_mention",
            "user": "U1",
            "text": "<@UBOT> hi",
            "ts": "1.0001",
            "channel": "C1",
        },
        event_id="Ev1",
        team_id="T1",
    )
    headers = signed_headers(body, signing_secret="secret")
    verifier = SignatureVerifier("secret")
    assert verifier.is_valid_request(body, headers)
    assert not SignatureVerifier("other").is_valid_request(body, headers)
    assert not verifier.is_valid_request(body.replace("hi", "ho"), headers)
    assert headers["Content-Type"] == "application/json"
    assert "X-Slack-Retry-Num" not in headers

    payload = json.loads(body)
    assert payload["type"] == "event_callback"
    assert payload["event_id"] == "Ev1"
    assert payload["team_id"] == "T1"
    assert payload["event"]["text"] == "<@UBOT> hi"
    assert payload["event"]["event_ts"] == "1.0001"
    assert payload["authorizations"][0]["user_id"] == "UBOT"
    assert payload["authorizations"][0]["is_bot"] is True
    assert isinstance(payload["event_time"], int)


def test_signed_headers_retry_and_old_timestamp() -> None:
    body = event_payload(event={"type": "message", "text": "x", "ts": "1.0"})
    headers = signed_headers(body, "secret", retry_num=1, retry_reason="http_timeout")
    assert headers["X-Slack-Retry-Num"] == "1"
    assert headers["X-Slack-Retry-Reason"] == "http_timeout"
    stale = signed_headers(body, "secret", timestamp=int(time.time()) - 3600)
    assert not SignatureVerifier("secret").is_valid_request(body, stale)  # replayed: too old
    assert json.loads(body)["event_id"] != json.loads(event_payload(event={}))["event_id"]


def test_block_actions_payload() -> None:
    body = block_actions_payload(
        "feedback_good",
        "42",
        user_id="U7",
        channel_id="C3",
        message_ts="1.0002",
        thread_ts="1.0001",
        response_url="https://hooks.example/1",
    )
    headers = signed_headers(body, "secret")
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert SignatureVerifier("secret").is_valid_request(body, headers)
    [raw] = parse_qs(body)["payload"]
    payload = json.loads(raw)
    assert payload["type"] == "block_actions"
    assert payload["user"]["id"] == "U7"
    assert payload["channel"]["id"] == "C3"
    assert payload["message"]["ts"] == "1.0002"
    assert payload["message"]["thread_ts"] == "1.0001"
    assert payload["container"]["channel_id"] == "C3"
    assert payload["trigger_id"]
    assert payload["response_url"] == "https://hooks.example/1"
    [action] = payload["actions"]
    assert (action["action_id"], action["value"], action["block_id"]) == (
        "feedback_good",
        "42",
        "b1",
    )
    assert "response_url" not in json.loads(parse_qs(block_actions_payload("a"))["payload"][0])


def test_url_verification_payload() -> None:
    payload = json.loads(url_verification_payload("abc"))
    assert payload == {
        "token": "verification-token",
        "challenge": "abc",
        "type": "url_verification",
    }
