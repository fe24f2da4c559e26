"""Admin logins over real HTTP: logging out ends the session on the server (the saved
cookie stops working), a new ADMIN_TOKEN ends every session of the old one, and wrong
tokens are throttled per address and overall (429, a clear page), each logged without
the token."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from bot.config import load_settings
from bot.web.access import SESSION_COOKIE
from bot.web.app import create_app
from bot.wiring import build_services
from tests.fakes.serve import ServedApp, serve_in_thread
from tests.web.test_admin_api import TOKEN, csrf_of, log_in, serve_admin

OTHER_TOKEN = "another-admin-token-0123456789abcdef"


@pytest.fixture
def served(database_url: str) -> Iterator[ServedApp]:
    with serve_admin(database_url) as app:
        yield app


def browser(served: ServedApp, address: str = "127.0.0.1") -> httpx.Client:
    """A client whose connections come from ``address`` (any of 127.0.0.0/8)."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=served.url, transport=transport, timeout=10)


def saved_cookie(client: httpx.Client) -> str:
    cookie = client.cookies.get(SESSION_COOKIE)
    assert cookie, "no session cookie after login"
    return cookie


def with_cookie(served: ServedApp, cookie: str, path: str = "/admin/") -> httpx.Response:
    with httpx.Client(base_url=served.url, cookies={SESSION_COOKIE: cookie}, timeout=10) as fresh:
        return fresh.get(path)


def test_logout_ends_the_session_on_the_server(served: ServedApp) -> None:
    with browser(served) as client:
        assert log_in(client).status_code == 303
        cookie = saved_cookie(client)
        page = client.get("/admin/")
        assert page.status_code == 200
        assert with_cookie(served, cookie).status_code == 200

        logout = client.post("/admin/logout", data={"csrf": csrf_of(page)})
        assert logout.status_code == 303

    # the cookie saved before logging out opens nothing any more
    stale = with_cookie(served, cookie)
    assert stale.status_code == 401 and "Log in" in stale.text
    assert with_cookie(served, cookie, "/admin/api/sessions").status_code == 401


def test_each_login_is_a_session_of_its_own(served: ServedApp) -> None:
    with browser(served) as first, browser(served) as second:
        log_in(first)
        log_in(second)
        first.post("/admin/logout", data={"csrf": csrf_of(first.get("/admin/"))})
        assert first.get("/admin/").status_code == 401
        assert second.get("/admin/").status_code == 200


def serve_bot(database_url: str, token: str) -> ServedApp:
    """The real app (lifespan on: serving() runs), without Slack."""
    settings = load_settings(
        DATABASE_URL=database_url, OPENAI_API_KEY="test-key", ADMIN_TOKEN=token, MCP_CONFIG=None
    )
    return serve_in_thread(create_app(build_services(settings)))


def test_a_new_admin_token_ends_every_session_even_when_the_old_one_comes_back(
    database_url: str,
) -> None:
    with serve_bot(database_url, TOKEN) as first, browser(first) as client:
        assert log_in(client).status_code == 303
        cookie = saved_cookie(client)
        assert with_cookie(first, cookie).status_code == 200

    with serve_bot(database_url, OTHER_TOKEN) as second:
        assert with_cookie(second, cookie).status_code == 401

    # back to the first token: the session it had stays ended
    with serve_bot(database_url, TOKEN) as third:
        assert with_cookie(third, cookie).status_code == 401


def test_wrong_tokens_from_one_address_are_throttled(
    served: ServedApp, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO), browser(served, "127.0.0.2") as client:
        for attempt in range(5):
            wrong = log_in(client, token=f"guess-{attempt}")
            assert wrong.status_code == 401 and "Wrong token." in wrong.text
        # even the right token waits now: trying it would still tell a guess from the token
        refused = log_in(client)
        api = client.get("/admin/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})

    assert refused.status_code == 429
    assert "Too many wrong admin tokens from your address" in refused.text
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert f"Try again in {refused.headers['Retry-After']} seconds" in refused.text
    assert api.status_code == 429 and "Too many wrong admin tokens" in api.json()["error"]
    failures = [r for r in caplog.records if "wrong admin token" in r.getMessage()]
    assert len(failures) == 5
    assert all("127.0.0.2" in r.getMessage() for r in failures)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "guess-" not in logged and TOKEN not in logged

    with browser(served, "127.0.0.3") as elsewhere:  # another address is not held up
        assert log_in(elsewhere).status_code == 303


def test_wrong_bearer_tokens_count_too(served: ServedApp) -> None:
    with browser(served, "127.0.0.4") as client:
        for attempt in range(5):
            headers = {"Authorization": f"Bearer guess-{attempt}"}
            assert client.get("/admin/api/sessions", headers=headers).status_code == 401
        assert log_in(client).status_code == 429


def test_wrong_tokens_from_many_addresses_are_throttled_overall(served: ServedApp) -> None:
    for host in range(10, 16):  # six addresses, five wrong tokens each: 30
        with browser(served, f"127.0.0.{host}") as client:
            for attempt in range(5):
                assert log_in(client, token=f"guess-{attempt}").status_code == 401

    with browser(served, "127.0.0.20") as newcomer:
        refused = log_in(newcomer)
    assert refused.status_code == 429
    assert "Too many wrong admin tokens from everyone" in refused.text


def test_a_valid_session_is_not_throttled(served: ServedApp) -> None:
    with browser(served, "127.0.0.5") as admin:
        log_in(admin)
        with browser(served, "127.0.0.5") as guesser:
            for attempt in range(6):
                log_in(guesser, token=f"guess-{attempt}")
        assert admin.get("/admin/").status_code == 200


def test_without_a_database_logging_in_is_503_not_500(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with (
        serve_admin(f"sqlite:///{tmp_path}/missing/dir/bot.db") as served,
        browser(served) as client,
    ):
        login = log_in(client)
        api = client.get("/admin/api/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert login.status_code == 503 and "The database is not answering" in login.text
    assert api.status_code == 503 and "not answering" in api.json()["error"]


def test_wrong_tokens_on_metrics_count_with_the_admin_pages(database_url: str) -> None:
    """Without METRICS_TOKEN, /metrics takes ADMIN_TOKEN: no faster way to guess it there."""
    with serve_bot(database_url, TOKEN) as served, browser(served, "127.0.0.6") as client:
        for attempt in range(5):
            headers = {"Authorization": f"Bearer guess-{attempt}"}
            assert client.get("/metrics", headers=headers).status_code == 401
        scrape = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        login = log_in(client)
    assert scrape.status_code == 429 and "Retry-After" in scrape.headers
    assert login.status_code == 429
