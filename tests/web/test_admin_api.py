"""The admin app over real HTTP: auth (Bearer, login cookie), the JSON documents, CSRF on
delete, escaping and security headers. Served by uvicorn, mounted at /admin as the real
app mounts it."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from bot.agent.admin_logins import AdminLogins
from bot.agent.sessions import Sessions
from bot.messages import Message, Summary, ToolCall
from bot.store.admin_sessions import AdminSessionStore
from bot.store.db import create_engine
from bot.store.history import HistoryStore
from bot.store.summaries import SummaryStore
from bot.web.admin import admin_app
from tests.fakes.serve import ServedApp, serve_in_thread
from tests.stored_turns import add_turn

TOKEN = "s3cret-admin-token-0123456789abcdef"
CALL = ToolCall("call_1", "jira_get_issue", '{"issue_key":"TASK-1"}')
FAILING_CALL = ToolCall("call_2", "jira_search_issues", '{"jql":"project = TASK","max_results":5}')
SCRIPT = "<script>window.__xss=1</script>"
IMAGE = '<img src=x onerror="window.__xss=2">'
LINK = "[click me](javascript:window.__xss=3)"


def seed_history(database_url: str) -> None:
    """C0123 "general": an answered turn with a tool call, a turn that hit the round cap
    after a failing tool, a failed turn and an answered one carrying XSS attempts.
    D0456: a plain direct-message turn."""

    async def run() -> None:
        store = HistoryStore(create_engine(database_url))
        try:
            await add_turn(
                store,
                "C0123",
                "what is TASK-1? 🎫 日本語",
                [
                    Message.assistant(None, (CALL,)),
                    Message.tool_result(CALL, '{"key":"TASK-1","summary":"Login form 🚀"}'),
                    Message.assistant("TASK-1 is open: the login form."),
                ],
            )
            await add_turn(
                store,
                "C0123",
                "search every TASK issue",
                [
                    Message.assistant(None, (FAILING_CALL,)),
                    Message.tool_result(FAILING_CALL, '{"error":"Jira did not answer in time"}'),
                    Message.assistant("I could not reach Jira."),
                ],
                outcome="max_rounds",
            )
            await add_turn(store, "C0123", SCRIPT, outcome="error", error="model timed out")
            await add_turn(store, "C0123", "show me a picture", [Message.assistant(IMAGE + LINK)])
            await store.set_channel_name("C0123", "general")
            await add_turn(
                store, "D0456", "how is the quarterly pipeline?", [Message.assistant("Fine.")]
            )
        finally:
            await store.engines.dispose()

    asyncio.run(run())


@contextlib.contextmanager
def serve_admin(database_url: str, token: str | None = TOKEN) -> Iterator[ServedApp]:
    """The admin app mounted at /admin in a small Starlette, served by uvicorn."""
    store = HistoryStore(create_engine(database_url))
    logins = AdminLogins(AdminSessionStore(store.engines), token) if token else None
    admin = admin_app(Sessions(store), logins)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await store.engines.dispose()  # on the server's own event loop

    routes = [Mount("/admin", app=admin)] if admin is not None else []
    with serve_in_thread(Starlette(routes=routes, lifespan=lifespan)) as served:
        yield served


@pytest.fixture
def served(database_url: str) -> Iterator[ServedApp]:
    seed_history(database_url)
    with serve_admin(database_url) as app:
        yield app


@pytest.fixture
def client(served: ServedApp) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=10) as http:
        yield http


@pytest.fixture
def bearer(served: ServedApp) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=served.url, headers=headers, timeout=10) as http:
        yield http


def log_in(client: httpx.Client, token: str = TOKEN, next_path: str = "") -> httpx.Response:
    return client.post("/admin/login", data={"token": token, "next": next_path})


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, "no CSRF field on the page"
    return found.group(1)


# -- who may enter ------------------------------------------------------------------------


def test_without_admin_token_there_is_no_admin(sqlite_url: str) -> None:
    assert admin_app(Sessions(HistoryStore(create_engine(sqlite_url))), None) is None
    with serve_admin(sqlite_url, token=None) as app:
        for path in ("/admin", "/admin/", "/admin/login", "/admin/api/sessions"):
            assert httpx.get(app.url + path).status_code == 404


@pytest.mark.parametrize(
    "authorization",
    [None, f"Bearer {TOKEN}x", "Bearer", f"Basic {TOKEN}", f"bearer {TOKEN[:-1]}", "Bearer null"],
)
def test_the_api_refuses_a_missing_or_wrong_token(client: httpx.Client, authorization) -> None:  # type: ignore[no-untyped-def]
    headers = {"Authorization": authorization} if authorization else {}
    for path in ("/admin/api/sessions", "/admin/api/sessions/C0123", "/admin/api/sessions/NOPE"):
        response = client.get(path, headers=headers)

        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert "error" in response.json()
        assert "general" not in response.text


def test_pages_show_only_the_login_form_to_strangers(client: httpx.Client) -> None:
    for path in ("/admin/", "/admin/sessions/C0123", "/admin/sessions/C0123/export.jsonl"):
        response = client.get(path)

        assert response.status_code == 401
        assert 'action="/admin/login"' in response.text
        assert "TASK-1" not in response.text and "C0123</code>" not in response.text


def test_a_forged_or_tampered_cookie_is_refused(client: httpx.Client) -> None:
    log_in(client)
    cookie = client.cookies["bot_admin"]
    for forged in (cookie[:-2] + "xx", "eyJjc3JmIjoiYSJ9.aaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbb", ""):
        client.cookies.clear()
        client.cookies.set("bot_admin", forged, path="/admin")

        assert client.get("/admin/api/sessions").status_code == 401


# -- the documents ------------------------------------------------------------------------


def test_bearer_reads_the_list_document(bearer: httpx.Client) -> None:
    response = bearer.get("/admin/api/sessions")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    direct, channel = response.json()  # most recent first
    assert direct == {
        "channel_id": "D0456",
        "messages": 2,
        "turns": 1,
        "last_activity": direct["last_activity"],
        "feedback": {"positive": 0, "negative": 0},
    }
    assert channel["channel_id"] == "C0123" and channel["name"] == "general"
    assert (channel["messages"], channel["turns"]) == (11, 4)


def test_bearer_reads_the_session_document(bearer: httpx.Client) -> None:
    document = bearer.get("/admin/api/sessions/C0123").json()

    assert document["channel_id"] == "C0123"
    user, calling, result, answer = document["messages"][:4]
    assert user["role"] == "user" and user["content"] == "what is TASK-1? 🎫 日本語"
    assert user["user_id"] == "U1" and "tool_calls" not in user
    assert calling["content"] is None and calling["tool_calls"] == [CALL.to_dict()]
    assert "user_id" not in calling and "name" not in calling
    assert result == {
        "id": result["id"],
        "role": "tool",
        "content": '{"key":"TASK-1","summary":"Login form 🚀"}',
        "tool_call_id": "call_1",
        "name": "jira_get_issue",
        "turn_id": user["turn_id"],
        "created_at": result["created_at"],
    }
    assert answer["content"] == "TASK-1 is open: the login form."
    assert document["messages"][8]["content"] == SCRIPT  # stored as sent; JSON is not HTML
    outcomes = [turn["outcome"] for turn in document["turns"]]
    assert outcomes == ["answered", "max_rounds", "error", "answered"]
    assert document["turns"][0]["tools"] == ["jira_get_issue"]
    assert document["turns"][0]["latency_ms"] == 2345


def test_an_unknown_channel_is_404(bearer: httpx.Client) -> None:
    response = bearer.get("/admin/api/sessions/NOPE")

    assert response.status_code == 404
    assert response.json() == {"error": "no stored session for that channel"}
    assert bearer.get("/admin/sessions/NOPE").status_code == 404


# -- the login cookie ---------------------------------------------------------------------


def test_a_wrong_token_gets_the_form_again(client: httpx.Client) -> None:
    response = log_in(client, token="not-it")

    assert response.status_code == 401
    assert "Wrong token" in response.text
    assert "set-cookie" not in response.headers
    assert client.get("/admin/api/sessions").status_code == 401


def test_the_login_cookie_opens_pages_and_api(client: httpx.Client) -> None:
    response = log_in(client, next_path="/admin/sessions/C0123")

    assert response.status_code == 303
    assert response.headers["location"] == "/admin/sessions/C0123"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("bot_admin=")
    for attribute in ("HttpOnly", "SameSite=strict", "Path=/admin", "Max-Age="):
        assert attribute in cookie
    assert TOKEN not in cookie
    assert client.get("/admin/api/sessions").status_code == 200
    page = client.get("/admin/sessions/C0123")
    assert page.status_code == 200 and "jira_get_issue" in page.text
    assert client.get("/admin/login").status_code == 303  # already in


@pytest.mark.parametrize(
    "next_path", ["https://evil.example/", "//evil.example/admin/", "/elsewhere", "/admin\\..\\x"]
)
def test_login_never_redirects_off_the_admin(client: httpx.Client, next_path: str) -> None:
    response = log_in(client, next_path=next_path)

    assert response.status_code == 303
    assert response.headers["location"] == "/admin/"


def test_logout_needs_csrf_then_ends_the_session(client: httpx.Client) -> None:
    log_in(client)
    token = csrf_of(client.get("/admin/"))

    assert client.post("/admin/logout").status_code == 403
    assert client.get("/admin/api/sessions").status_code == 200
    response = client.post("/admin/logout", data={"csrf": token})
    assert response.status_code == 303
    assert "Max-Age=0" in response.headers["set-cookie"]
    assert client.get("/admin/api/sessions").status_code == 401


# -- deleting -----------------------------------------------------------------------------


def test_delete_without_the_right_csrf_token_is_403_and_deletes_nothing(
    served: ServedApp, client: httpx.Client, bearer: httpx.Client
) -> None:
    log_in(client)
    with httpx.Client(base_url=served.url) as other:
        log_in(other)
        foreign = csrf_of(other.get("/admin/sessions/C0123/delete"))

    for form in ({}, {"csrf": ""}, {"csrf": "wrong"}, {"csrf": foreign}):
        response = client.post("/admin/sessions/C0123/delete", data=form)

        assert response.status_code == 403
        assert "did not come from this site" in response.text
    assert httpx.post(served.url + "/admin/sessions/C0123/delete").status_code == 401
    assert bearer.get("/admin/api/sessions/C0123").status_code == 200


def test_delete_goes_through_the_confirmation_page(
    client: httpx.Client, bearer: httpx.Client
) -> None:
    log_in(client)
    confirm = client.get("/admin/sessions/C0123/delete")
    assert confirm.status_code == 200
    assert "11 messages and 4 turns" in confirm.text

    response = client.post("/admin/sessions/C0123/delete", data={"csrf": csrf_of(confirm)})

    assert response.status_code == 303
    assert response.headers["location"] == "/admin/?deleted=C0123"
    assert bearer.get("/admin/api/sessions/C0123").status_code == 404
    assert [s["channel_id"] for s in bearer.get("/admin/api/sessions").json()] == ["D0456"]
    assert "Session <code>C0123</code> was deleted" in client.get(response.headers["location"]).text


# -- the pages ----------------------------------------------------------------------------


def test_stored_text_is_escaped(bearer: httpx.Client) -> None:
    page = bearer.get("/admin/sessions/C0123").text

    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page
    # an answer renders as Markdown, whose escaping writes a quote as &quot;
    assert "&lt;img src=x onerror=&quot;window.__xss=2&quot;&gt;" in page
    assert "<script" not in page and "<img" not in page
    assert 'href="javascript' not in page and LINK in page


def test_every_response_has_the_security_headers(served: ServedApp, bearer: httpx.Client) -> None:
    responses = [
        bearer.get("/admin/"),
        bearer.get("/admin/sessions/C0123"),
        bearer.get("/admin/api/sessions"),
        bearer.get("/admin/static/admin.css"),
        bearer.get("/admin/no-such-page"),
        httpx.get(served.url + "/admin/login"),
    ]
    for response in responses:
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'none'" in csp
        assert "frame-ancestors 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize(
    ("query", "channels"),
    [
        ("", ["D0456", "C0123"]),
        ("?q=quarterly", ["D0456"]),  # text in a message
        ("?q=login+FORM", ["C0123"]),  # text in a tool result, any case
        ("?q=genera", ["C0123"]),  # the channel's name
        ("?q=d04", ["D0456"]),  # the channel ID
        ("?q=100%25", []),  # LIKE wildcards are literal
        ("?sort=messages&order=desc", ["C0123", "D0456"]),
        ("?sort=turns&order=asc", ["D0456", "C0123"]),
        ("?sort=channel", ["C0123", "D0456"]),
        ("?sort=last_activity&order=asc", ["C0123", "D0456"]),
    ],
)
def test_the_sessions_list_searches_and_sorts(bearer: httpx.Client, query: str, channels) -> None:  # type: ignore[no-untyped-def]
    page = bearer.get("/admin/" + query)

    assert page.status_code == 200
    assert re.findall(r'href="/admin/sessions/(\w+)"', page.text) == channels


def test_the_session_page_filters_problem_turns(bearer: httpx.Client) -> None:
    everything = bearer.get("/admin/sessions/C0123").text
    problems = bearer.get("/admin/sessions/C0123?turns=problems").text

    assert "TASK-1 is open" in everything and "show me a picture" in everything
    assert "TASK-1 is open" not in problems and "show me a picture" not in problems
    assert "Jira did not answer in time" in problems and "model timed out" in problems
    assert "Failed or capped (2)" in problems


def test_exports_download_the_session(bearer: httpx.Client) -> None:
    jsonl = bearer.get("/admin/sessions/C0123/export.jsonl")
    assert jsonl.status_code == 200
    assert jsonl.headers["content-disposition"] == 'attachment; filename="session-C0123.jsonl"'
    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert len(lines) == 11 and {line["channel_id"] for line in lines} == {"C0123"}
    assert lines[1]["content"] is None

    exported = bearer.get("/admin/sessions/C0123/export.csv")
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text, newline="")))
    assert len(rows) == 11 and rows[0]["content"] == "what is TASK-1? 🎫 日本語"

    assert bearer.get("/admin/sessions/C0123/export.xml").status_code == 404
    assert bearer.get("/admin/sessions/NOPE/export.csv").status_code == 404


def test_an_edited_question_is_marked_with_its_time(
    bearer: httpx.Client, database_url: str
) -> None:
    async def edit() -> None:
        store = HistoryStore(create_engine(database_url))
        try:
            (question, _) = await store.messages("D0456")
            assert question.slack_ts is not None
            await store.edit_slack_message("D0456", question.slack_ts, "how is Q3's pipeline?", 6)
        finally:
            await store.engines.dispose()

    asyncio.run(edit())
    page = bearer.get("/admin/sessions/D0456").text
    document = bearer.get("/admin/api/sessions/D0456").json()

    assert "how is Q3&#39;s pipeline?" in page and page.count('class="edited"') == 1
    question, answer = document["messages"]
    assert question["edited_at"] >= question["created_at"] and "edited_at" not in answer


def test_the_session_page_and_document_show_the_summaries(
    bearer: httpx.Client, database_url: str
) -> None:
    assert "Summaries of older messages" not in bearer.get("/admin/sessions/D0456").text

    async def summarise() -> None:
        store = HistoryStore(create_engine(database_url))
        try:
            question, answer = await store.messages("D0456")
            assert question.id is not None and answer.id is not None
            summary = Summary(
                "D0456", f"The pipeline was asked about. {SCRIPT}", question.id, answer.id, 12
            )
            await SummaryStore(store.engines).add(summary)
        finally:
            await store.engines.dispose()

    asyncio.run(summarise())
    page = bearer.get("/admin/sessions/D0456").text
    (summary,) = bearer.get("/admin/api/sessions/D0456").json()["summaries"]

    assert "Summaries of older messages" in page and "The pipeline was asked about." in page
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page and "<script" not in page
    assert summary["text"] == f"The pipeline was asked about. {SCRIPT}"
    assert summary["last_message_id"] > summary["first_message_id"]
