"""The CRM flows end to end in the agent core, against each CRM: the bot's own tables
(CRM=local), the strict fake Salesforce and the strict fake HubSpot over HTTPS, the real
openai client against the fake model in both API modes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.agent.conversations import Incoming
from bot.store.crm import CrmStore
from bot.store.db import create_engine
from tests.cli.helpers import EXAMPLES
from tests.cli.test_flows import tool_result
from tests.crm_fakes import OBRIEN, hubspot_settings, salesforce_settings
from tests.fakes.hubspot_server import FakeHubSpot
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.salesforce_server import FakeSalesforce
from tests.stored_turns import history

CRMS = ["local", "salesforce", "hubspot"]
API_MODES = ["chat", "responses"]
LINKS = {"local": None, "salesforce": "/lightning/r/", "hubspot": "/record/0-"}


@pytest.fixture
def crm_settings(  # type: ignore[no-untyped-def]
    request, database_url: str, salesforce: FakeSalesforce, hubspot: FakeHubSpot, tmp_path: Path
) -> dict[str, Any]:
    """The settings of the CRM the test is parametrized with (``crm``), its data ready."""
    crm = request.node.callspec.params["crm"]
    if crm == "salesforce":
        return salesforce_settings(salesforce)
    if crm == "hubspot":
        return hubspot_settings(hubspot)
    extra = tmp_path / "obrien.csv"
    extra.write_text(
        "id,name,email,title,account_id\n"
        f"c-103,{OBRIEN['name']},{OBRIEN['email']},{OBRIEN['title']},acc-001\n"
    )
    seed_local(database_url, EXAMPLES / "contacts.csv", EXAMPLES / "accounts.csv", extra)
    return {"CRM": "local"}


def seed_local(database_url: str, contacts: Path, accounts: Path, more: Path) -> None:
    import asyncio

    async def load() -> None:
        engine = create_engine(database_url)
        try:
            store = CrmStore(engine)
            await store.import_csv(contacts, accounts)
            await store.import_csv(more, None)
        finally:
            await engine.dispose()

    asyncio.run(load())


@pytest.fixture
def jira() -> Iterator[FakeJira]:
    with FakeJira(email="bot@example.com", api_token="jira-secret", projects={"TASK": {}}) as fake:
        yield fake


async def ask(services, text: str, channel: str = "C1"):  # type: ignore[no-untyped-def]
    async with services.jobs.hold(channel):
        return await services.conversations.ask(Incoming(channel, text, "U1"))


async def tool_results(services, channel: str = "C1") -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {
        m.tool_call_id: json.loads(m.content or "{}")
        for m in await history(services).messages(channel)
        if m.role == "tool"
    }


@pytest.mark.parametrize("api", API_MODES)
@pytest.mark.parametrize("crm", CRMS)
async def test_look_up_a_contact_read_the_account_and_summarise(
    make_services, fake_openai: FakeOpenAI, crm_settings: dict[str, Any], crm: str, api: str
) -> None:
    services = make_services(LLM_API=api, **crm_settings)

    def model(request: Request) -> ToolUse | Reply:
        step = len(fake_openai.requests)
        if step == 1:
            return ToolUse("crm_find_contacts", {"query": "Ana"}, "find")
        if step == 2:
            (contact,) = tool_result(request, "find")["contacts"]
            return ToolUse("crm_get_account", {"account_id": contact["account_id"]}, "acct")
        account = tool_result(request, "acct")
        names = ", ".join(c["name"] for c in account["contacts"])
        return Reply(text=f"{account['name']} ({account['crm']}): {names}.")

    fake_openai.responder = model
    reply = await ask(services, "Look up Ana, get her account's details and summarise both")

    assert reply.ok, reply.text
    assert reply.text.startswith("Acme Corp (") and "Ana Lima" in reply.text
    assert "Sean O'Brien" in reply.text and "Tom Becker" in reply.text
    results = await tool_results(services)
    (ana,) = results["find"]["contacts"]
    assert ana["name"] == "Ana Lima" and ana["account_name"] == "Acme Corp"
    assert (
        results["acct"]["crm"]
        == results["find"]["crm"]
        == {"local": "local", "salesforce": "Salesforce", "hubspot": "HubSpot"}[crm]
    )
    if LINKS[crm]:
        assert LINKS[crm] in ana["url"] and LINKS[crm] in results["acct"]["url"]
    assert all(r.status == 200 for r in fake_openai.requests)


@pytest.mark.parametrize("api", API_MODES)
@pytest.mark.parametrize("crm", CRMS)
async def test_find_a_contact_then_open_a_ticket_for_them(
    make_services,
    fake_openai: FakeOpenAI,
    crm_settings: dict[str, Any],
    jira: FakeJira,
    crm: str,
    api: str,
) -> None:
    services = make_services(
        LLM_API=api,
        WRITE_APPROVAL="off",
        JIRA_URL=jira.url,
        JIRA_EMAIL="bot@example.com",
        JIRA_API_TOKEN="jira-secret",
        JIRA_PROJECT="TASK",
        **crm_settings,
    )

    def model(request: Request) -> ToolUse | Reply:
        step = len(fake_openai.requests)
        if step == 1:
            return ToolUse("crm_find_contacts", {"query": "ana.lima@acme.example"}, "find")
        if step == 2:
            (contact,) = tool_result(request, "find")["contacts"]
            link = contact.get("url") or contact["id"]
            return ToolUse(
                "jira_create_issue",
                {
                    "summary": f"Call back {contact['name']} ({contact['account_name']})",
                    "description": f"Invoice export fails for her team. CRM: {link}",
                },
                "create",
            )
        created = tool_result(request, "create")
        return Reply(text=f"Created {created['key']}: {created['url']}")

    fake_openai.responder = model
    reply = await ask(services, "find Ana and open a ticket for her", channel="C2")

    assert reply.ok and reply.text == f"Created TASK-1: {jira.url}/browse/TASK-1"
    (post,) = jira.calls("POST", "/issue$")
    assert post.json["fields"]["summary"] == "Call back Ana Lima (Acme Corp)"
    if LINKS[crm]:
        assert LINKS[crm] in post.json["fields"]["description"]


@pytest.mark.parametrize("crm", CRMS)
async def test_a_quote_a_percent_and_an_injection_in_the_query(
    make_services, fake_openai: FakeOpenAI, crm_settings: dict[str, Any], crm: str
) -> None:
    services = make_services(**crm_settings)
    queries = {"q1": "O'Brien", "q2": "' OR Name LIKE '%", "q3": "100%", "q4": "sean o'brien acme"}
    fake_openai.script(
        Reply(
            tool_calls=[ToolUse("crm_find_contacts", {"query": q}, i) for i, q in queries.items()]
        ),
        Reply(text="Searched."),
    )

    assert (await ask(services, "find O'Brien", channel="C3")).ok

    results = await tool_results(services, "C3")
    for call in ("q1", "q4"):
        assert [c["name"] for c in results[call]["contacts"]] == [OBRIEN["name"]], call
    for call in ("q2", "q3"):
        assert results[call]["contacts"] == [] and "No contact matches" in results[call]["note"]


async def test_an_expired_salesforce_token_is_renewed_once(
    make_services, fake_openai: FakeOpenAI, salesforce: FakeSalesforce
) -> None:
    services = make_services(**salesforce_settings(salesforce))
    fake_openai.script(
        ToolUse("crm_find_contacts", {"query": "Lucía"}, "find1"),
        Reply(text="one"),
        ToolUse("crm_find_contacts", {"query": "Lucía"}, "find2"),
        Reply(text="two"),
    )
    assert (await ask(services, "who is Lucía?")).ok
    tokens = len(salesforce.tokens)
    salesforce.expire_token()

    reply = await ask(services, "and again?")

    assert reply.ok and reply.text == "two"
    assert len(salesforce.tokens) == tokens + 1  # fetched again, once
    # the first turn's query, the one refused, the one after the renewal
    assert len(salesforce.calls("GET", "/query")) == 3
    result = (await tool_results(services))["find2"]
    assert [c["name"] for c in result["contacts"]] == ["Lucía Gómez"]


async def test_a_hubspot_429_is_waited_out(
    make_services, fake_openai: FakeOpenAI, hubspot: FakeHubSpot
) -> None:
    services = make_services(**hubspot_settings(hubspot))
    fake_openai.script(ToolUse("crm_find_contacts", {"query": "Fatima"}, "find"), Reply(text="ok"))
    hubspot.throttle_next(retry_after_s=0.5, path="/search$")
    started = time.monotonic()

    assert (await ask(services, "who is Fatima?")).ok

    assert time.monotonic() - started >= 0.5
    (result,) = (await tool_results(services)).values()
    assert [c["name"] for c in result["contacts"]] == ["Fatima Rahman"]
    assert len(hubspot.calls("POST", "/contacts/search$")) == 2


@pytest.mark.parametrize("crm", ["salesforce", "hubspot"])
async def test_a_crm_answering_503_gives_the_model_an_error_and_the_person_an_answer(
    make_services,
    fake_openai: FakeOpenAI,
    crm_settings: dict[str, Any],
    salesforce: FakeSalesforce,
    hubspot: FakeHubSpot,
    crm: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    services = make_services(**crm_settings)
    fake = salesforce if crm == "salesforce" else hubspot
    fake.fail_next("/query|/search", 503, times=10)
    fake_openai.script(
        ToolUse("crm_find_contacts", {"query": "Ana"}, "find"),
        lambda request: Reply(text=f"Sorry: {tool_result(request, 'find')['error']}"),
    )

    with caplog.at_level(logging.INFO):
        reply = await ask(services, "who is Ana?")

    assert reply.ok and reply.text.startswith("Sorry: ")
    assert "HTTP 503" in reply.text and "Try again later" in reply.text
    assert len(fake.calls(None, "/query|/search")) == 3  # tried, then retried twice
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
