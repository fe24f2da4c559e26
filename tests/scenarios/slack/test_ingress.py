"""What comes in over HTTP: forged or stale requests are refused before anything runs, Slack's
url_verification and ssl_check work, ignored events are never answered nor stored; /healthz and
/admin."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from bot.config import load_settings
from bot.web.app import create_app
from bot.wiring import build_services
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.serve import serve_in_thread
from tests.fakes.slack_server import (
    FakeSlack,
    event_payload,
    signed_headers,
    url_verification_payload,
)
from tests.scenarios.slack.conftest import (
    BOT,
    SECRET,
    Clock,
    Database,
    RunningBot,
    dm,
    mention,
    posts,
)

ADMIN_TOKEN = "admin-secret-0123456789abcdef0123"


async def nothing_happened(
    bot: RunningBot, slack: FakeSlack, openai: FakeOpenAI, db: Database, channel: str, ts: str
) -> None:
    assert bot.in_flight == 0
    assert [c.method for c in slack.calls] == ["auth.test"]
    assert openai.requests == []
    assert await db.history.messages(channel) == []
    assert await db.inbox.status(channel, ts) is None


def forged(body: str, case: str) -> tuple[str, dict[str, str]]:
    now = int(time.time())
    if case == "wrong secret":
        return body, signed_headers(body, "not-the-secret")
    if case == "no signature":
        headers = signed_headers(body, SECRET)
        del headers["X-Slack-Signature"]
        return body, headers
    if case == "no timestamp":
        headers = signed_headers(body, SECRET)
        del headers["X-Slack-Request-Timestamp"]
        return body, headers
    if case == "stale (301 s)":
        return body, signed_headers(body, SECRET, timestamp=now - 301)
    if case == "replayed 6 minutes later":
        return body, signed_headers(body, SECRET, timestamp=now - 360, retry_num=1)
    if case == "from the future":
        return body, signed_headers(body, SECRET, timestamp=now + 400)
    if case == "body re-serialised":
        return json.dumps(json.loads(body), indent=1), signed_headers(body, SECRET)
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "wrong secret",
        "no signature",
        "no timestamp",
        "stale (301 s)",
        "replayed 6 minutes later",
        "from the future",
        "body re-serialised",
    ],
)
async def test_unverified_requests_are_refused_before_anything_runs(
    bot: RunningBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    db: Database,
    clock: Clock,
    case: str,
) -> None:
    ts = clock.ts()
    body, headers = forged(event_payload(mention("C1", ts)), case)

    response = await bot.post(body, headers)

    assert response.status_code == 401
    await nothing_happened(bot, fake_slack, fake_openai, db, "C1", ts)


async def test_url_verification_and_ssl_check(bot: RunningBot, fake_slack: FakeSlack) -> None:
    body = url_verification_payload("the-challenge")
    verified = await bot.post(body, signed_headers(body, SECRET))
    check = "ssl_check=1&token=verification-token"
    ssl = await bot.post(check, signed_headers(check, SECRET))

    assert verified.status_code == 200 and verified.json() == {"challenge": "the-challenge"}
    assert ssl.status_code == 200
    assert [c.method for c in fake_slack.calls] == ["auth.test"]


IGNORED: dict[str, dict[str, Any]] = {
    "another bot's message": {"subtype": "bot_message", "bot_id": "B2", "channel_type": "im"},
    "a bot's message without subtype": {"bot_id": "B2", "channel_type": "im"},
    "the bot itself": {"user": BOT, "channel_type": "im"},
    "an edit": {"subtype": "message_changed", "channel_type": "im"},
    "a join": {"subtype": "channel_join", "channel_type": "channel"},
    "a thread broadcast": {"subtype": "thread_broadcast", "channel_type": "im"},
    "a channel message without a mention": {"channel_type": "channel", "text": "hi all"},
    "a mention by a bot": {"type": "app_mention", "bot_id": "B2"},
}


@pytest.mark.parametrize("case", IGNORED)
async def test_ignored_events_are_acked_and_neither_answered_nor_stored(
    bot: RunningBot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    db: Database,
    clock: Clock,
    case: str,
) -> None:
    ts = clock.ts()
    event = {**dm("C1", ts, f"<@{BOT}> hello"), **IGNORED[case]}

    response = await bot.send(event)

    assert response.status_code == 200
    await nothing_happened(bot, fake_slack, fake_openai, db, "C1", ts)


async def test_a_file_share_is_answered(
    bot: RunningBot, fake_slack: FakeSlack, clock: Clock
) -> None:
    await bot.send(dm("D1", clock.ts(), "see attached", subtype="file_share", files=[]))
    await fake_slack.wait_for(lambda s: bool(posts(s, "D1")))


async def test_healthz(bot: RunningBot) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{bot.url}/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


async def test_healthz_without_a_database_is_503(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = load_settings(
        DATABASE_URL=f"sqlite:///{tmp_path}/missing/dir/bot.db", OPENAI_API_KEY="test-key"
    )
    with serve_in_thread(create_app(build_services(settings))) as served:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{served.url}/healthz")
    assert response.status_code == 503


async def test_admin_is_404_without_a_token_and_served_with_one(start_bot) -> None:  # type: ignore[no-untyped-def]
    closed = start_bot()
    opened = start_bot(ADMIN_TOKEN=ADMIN_TOKEN)
    async with httpx.AsyncClient() as client:
        missing = await client.get(f"{closed.url}/admin/api/sessions")
        served = await client.get(
            f"{opened.url}/admin/api/sessions", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
    assert missing.status_code == 404
    assert served.status_code == 200 and served.json() == []
