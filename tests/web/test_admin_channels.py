"""The channels' settings in the admin app over real HTTP: the JSON API (PUT, null unsets),
the form's CSRF token, the same checks as the CLI, and who changed what; the session
document and export that carry them."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from bot.agent.admin_logins import AdminLogins
from bot.agent.channels import Channels
from bot.agent.sessions import Sessions
from bot.store.admin_sessions import AdminSessionStore
from bot.store.channels import ChannelSettingsStore
from bot.store.db import create_engines
from bot.store.history import HistoryStore
from bot.web.admin import admin_app
from tests.fakes.serve import ServedApp, serve_in_thread
from tests.web.test_admin_api import TOKEN, csrf_of, log_in, seed_history


@contextlib.contextmanager
def serve_channels(database_url: str) -> Iterator[ServedApp]:
    """The admin app with the channels' settings, mounted at /admin."""
    engines = create_engines(database_url)
    channels = Channels(ChannelSettingsStore(engines), ["SUP"], lambda: ["jira_get_issue"])
    logins = AdminLogins(AdminSessionStore(engines), TOKEN)
    admin = admin_app(Sessions(HistoryStore(engines)), logins, channels=channels)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await engines.dispose()

    with serve_in_thread(Starlette(routes=[Mount("/admin", app=admin)], lifespan=lifespan)) as s:
        yield s


@pytest.fixture
def served(database_url: str) -> Iterator[ServedApp]:
    with serve_channels(database_url) as app:
        yield app


def test_the_api_sets_and_unsets_and_records_who(served: ServedApp) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=served.url, headers=headers, timeout=10) as api:
        put = api.put("/admin/api/channels/C1", json={"tools": "jira_*,nope", "answer_all": True})
        assert put.status_code == 200
        assert put.json()["settings"] == {"tools": "jira_*,nope", "answer_all": "on"}
        assert put.json()["warnings"] == ["tools pattern 'nope' matches no tool offered now"]
        bad = api.put("/admin/api/channels/C1", json={"answer_all": None, "jira_project": "X"})
        assert bad.status_code == 400 and "jira_project" in bad.json()["error"]
        assert api.put("/admin/api/channels/C1", json={"tools": None}).status_code == 200

        document = api.get("/admin/api/channels/C1").json()
        listed = api.get("/admin/api/channels").json()

    assert document["settings"] == {"answer_all": "on"}
    assert [(c["key"], c["value"], c["by"]) for c in document["changes"]] == [
        ("tools", "jira_*,nope", "admin"),
        ("answer_all", "on", "admin"),
        ("tools", None, "admin"),
    ]
    assert listed == [{"channel_id": "C1", "settings": {"answer_all": "on"}}]


def test_a_change_without_its_csrf_token_is_refused(served: ServedApp) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as browser:
        log_in(browser)
        form = browser.get("/admin/channels/C1")
        csrf = csrf_of(form)

        forged = browser.post("/admin/channels/C1", data={"instructions": "be rude"})
        wrong = browser.post("/admin/channels/C1", data={"instructions": "x", "csrf": "nope"})
        put = browser.put("/admin/api/channels/C1", json={"instructions": "be rude"})
        assert [r.status_code for r in (forged, wrong, put)] == [403, 403, 403]
        assert browser.get("/admin/api/channels/C1").json()["settings"] == {}

        saved = browser.post("/admin/channels/C1", data={"instructions": "Be brief", "csrf": csrf})
        assert saved.status_code == 200 and "Saved." in saved.text
        assert browser.get("/admin/api/channels/C1").json()["settings"] == {
            "instructions": "Be brief"
        }


def test_the_session_document_and_export_carry_the_channels_own_settings(
    database_url: str,
) -> None:
    seed_history(database_url)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        serve_channels(database_url) as served,
        httpx.Client(base_url=served.url, headers=headers, timeout=10) as api,
    ):
        assert api.put("/admin/api/channels/C0123", json={"answer_all": True}).status_code == 200
        document = api.get("/admin/api/sessions/C0123").json()
        other = api.get("/admin/api/sessions/D0456").json()
        lines = api.get("/admin/sessions/C0123/export.jsonl").text.splitlines()
        rows = list(csv.DictReader(io.StringIO(api.get("/admin/sessions/C0123/export.csv").text)))

    values = {"answer_all": "on"}
    assert document["channel_settings"] == values and other["channel_settings"] == {}
    assert [json.loads(line)["channel_settings"] for line in lines] == [values] * 11
    assert [json.loads(row["channel_settings"]) for row in rows] == [values] * 11
