"""Hostile requests to POST /slack/events (HTTP mode, over real HTTP): a stranger's junk,
a bad timestamp or a huge body is refused before anything is parsed or stored, with one
warning line at most (its size and path, never the body) and never a 500 or a traceback."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from urllib.parse import parse_qs, urlencode

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import (
    FakeSlack,
    block_actions_payload,
    event_payload,
    signed_headers,
)
from tests.scenarios.slack.conftest import SECRET, Clock, RunningBot, mention

MB = 1024 * 1024

JUNK: dict[str, bytes] = {
    "broken JSON": b"{bad",
    "a JSON array": b'[{"type": "event_callback"}]',
    "invalid UTF-8": b'{"type": "\xff\xfe"}',
    "a form with broken JSON": b"payload=%7Bbad",
    "a form with invalid UTF-8": b"payload=\xff",
}


def quiet_refusal(caplog: pytest.LogCaptureFixture, body: bytes, size: int) -> None:
    """At most one line, at WARNING, naming the size and the path; no traceback, no body."""
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) <= 1, [r.getMessage() for r in records]
    for record in records:
        text = record.getMessage()
        assert record.levelno == logging.WARNING and record.exc_info is None, text
        assert "/slack/events" in text and str(size) in text, text
        assert "\n" not in text
        if len(body) >= 4:
            assert body.decode(errors="replace") not in text


def nothing_ran(bot: RunningBot, slack: FakeSlack, openai: FakeOpenAI) -> None:
    assert bot.in_flight == 0
    assert [c.method for c in slack.calls] == ["auth.test"]
    assert openai.requests == []


@pytest.mark.parametrize("case", JUNK)
@pytest.mark.parametrize("signature", ["unsigned", "mis-signed"])
async def test_junk_from_a_stranger_is_401_with_one_line(
    bot: RunningBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    case: str,
    signature: str,
) -> None:
    body = JUNK[case]
    headers = {"Content-Type": "application/json"}
    if signature == "mis-signed":  # signed_headers would not sign a body that is not UTF-8
        headers["X-Slack-Request-Timestamp"] = str(int(time.time()))
        headers["X-Slack-Signature"] = "v0=" + "0" * 64

    with caplog.at_level(logging.INFO):
        response = await bot.post(body, headers)

    assert response.status_code == 401
    quiet_refusal(caplog, body, len(body))
    nothing_ran(bot, fake_slack, fake_openai)


@pytest.mark.parametrize("timestamp", ["abc", "1e9", "-5", "", "17.5", "0x1F", "9" * 40])
async def test_a_timestamp_that_is_no_number_is_401(
    bot: RunningBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    clock: Clock,
    timestamp: str,
) -> None:
    body = event_payload(mention("C1", clock.ts()))
    headers = signed_headers(body, SECRET, timestamp=timestamp)

    with caplog.at_level(logging.INFO):
        response = await bot.post(body, headers)

    assert response.status_code == 401
    quiet_refusal(caplog, body.encode(), len(body))
    nothing_ran(bot, fake_slack, fake_openai)


async def test_a_stale_signed_request_is_401_with_one_line(
    bot: RunningBot, caplog: pytest.LogCaptureFixture, clock: Clock
) -> None:
    body = event_payload(mention("C1", clock.ts()))
    with caplog.at_level(logging.INFO):
        response = await bot.post(
            body, signed_headers(body, SECRET, timestamp=int(time.time()) - 600)
        )
    assert response.status_code == 401
    quiet_refusal(caplog, body.encode(), len(body))


async def raw_exchange(bot: RunningBot, head: bytes, parts: list[bytes]) -> bytes:
    """Send ``head`` and ``parts`` over one connection, never finishing the body, and read
    what the server answers (within 10 s)."""
    served = bot.served
    reader, writer = await asyncio.open_connection(served.host, served.port)
    try:
        writer.write(head)
        for part in parts:
            writer.write(part)
            try:
                await writer.drain()
            except ConnectionError:  # the server stopped reading and closed: it answered
                break
        return await asyncio.wait_for(reader.read(4096), 10)
    finally:
        writer.close()


def request_head(**headers: str) -> bytes:
    lines = [
        "POST /slack/events HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def test_a_body_declared_over_1_mb_is_413_unread(
    bot: RunningBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """200 MB declared, 1 KB sent and the rest never: the answer comes all the same."""
    size = 200 * MB
    head = request_head(**{"Content-Type": "application/json", "Content-Length": str(size)})

    with caplog.at_level(logging.INFO):
        answer = await raw_exchange(bot, head, [b"{" + b" " * 1023])

    assert answer.startswith(b"HTTP/1.1 413 "), answer[:100]
    quiet_refusal(caplog, b"", size)
    nothing_ran(bot, fake_slack, fake_openai)


async def test_a_streamed_body_is_read_no_further_than_1_mb(
    bot: RunningBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A chunked body of 1.5 MB that never ends: refused once past 1 MB."""
    head = request_head(**{"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    chunk = b" " * (64 * 1024)
    parts = [f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"] * 24

    with caplog.at_level(logging.INFO):
        answer = await raw_exchange(bot, head, parts)

    assert answer.startswith(b"HTTP/1.1 413 "), answer[:100]
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == 1 and records[0].exc_info is None
    logged = records[0].getMessage()
    assert "/slack/events" in logged and "413" in logged
    read = int(re.search(r"\((\d+) bytes\)", logged).group(1))  # type: ignore[union-attr]
    assert MB < read < 2 * MB
    nothing_ran(bot, fake_slack, fake_openai)


async def test_a_signed_body_of_just_over_1_mb_is_413(bot: RunningBot, clock: Clock) -> None:
    body = event_payload(mention("C1", clock.ts(), "x" * MB))
    response = await bot.post(body, signed_headers(body, SECRET))
    assert response.status_code == 413


async def test_after_the_junk_a_real_question_is_answered(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    for body in JUNK.values():
        assert (await bot.post(body, {"Content-Type": "application/json"})).status_code == 401
    ts = clock.ts()
    assert (await bot.send(mention("C1", ts, "still there?"))).status_code == 200
    await fake_slack.wait_for(
        lambda s: (
            any(c.args.get("channel") == "C1" for c in s.calls_to("chat.postMessage"))
            or any(c.args.get("channel") == "C1" for c in s.calls_to("chat.startStream"))
        )
    )


ENVELOPE_KEYS = ["team", "enterprise", "authorizations", "user", "channel", "container"]
ODD_VALUES: list[object] = [5, True, [1], "x", {"id": 5}, []]


@pytest.mark.parametrize("kind", ["event", "button"])
async def test_signed_envelopes_with_odd_fields_are_never_a_500(
    bot: RunningBot, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """What Bolt reads of every request (team, user, authorizations, actions...) in the wrong
    shape: its reading raised, and the request got a 500 and a traceback."""
    if kind == "event":
        base = json.loads(event_payload(mention("C1", "1700000000.000100")))
    else:
        base = json.loads(parse_qs(block_actions_payload("approve", "1"))["payload"][0])
    keys = ENVELOPE_KEYS + (["actions"] if kind == "button" else [])
    statuses = {}
    with caplog.at_level(logging.WARNING):
        for key in keys:
            for value in ODD_VALUES:
                text = json.dumps({**base, key: value})
                body = urlencode({"payload": text}) if kind == "button" else text
                response = await bot.post(body, signed_headers(body, SECRET))
                statuses[key, repr(value)] = response.status_code
    await bot.idle()
    assert {k: s for k, s in statuses.items() if s != 200} == {}
    failures = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in failures] == []


@pytest.mark.parametrize("body", ["[1, 2]", '"text"', "null"])
async def test_a_signed_json_body_with_a_charset_that_is_no_object_is_acknowledged(
    bot: RunningBot, caplog: pytest.LogCaptureFixture, body: str
) -> None:
    headers = signed_headers(body, SECRET, content_type="application/json; charset=utf-8")
    with caplog.at_level(logging.WARNING):
        response = await bot.post(body, headers)
    assert response.status_code == 200
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_a_client_gone_before_the_end_of_its_body_leaves_one_line(
    bot: RunningBot, caplog: pytest.LogCaptureFixture
) -> None:
    head = request_head(**{"Content-Type": "application/json", "Content-Length": "1000"})
    with caplog.at_level(logging.INFO):
        _, writer = await asyncio.open_connection(bot.served.host, bot.served.port)
        writer.write(head + b'{"type": "event_')
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.close()
        await asyncio.sleep(0.5)
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) <= 1 and all(r.exc_info is None for r in records), records
