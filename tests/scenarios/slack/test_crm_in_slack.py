"""The CRM flows as a person sees them in a Slack thread (the fake Slack), against the fake
Salesforce and the fake HubSpot: look Ana up and summarise her account; find her and open
a ticket (Create pressed); log a note on her (written only once Go ahead is pressed)."""

from __future__ import annotations

import json
from typing import Any

from tests.cli.test_flows import tool_result
from tests.crm_fakes import hubspot_settings, salesforce_settings
from tests.fakes.hubspot_server import FakeHubSpot
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.salesforce_server import FakeSalesforce
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import answers, jira_settings, posted_card, press
from tests.scenarios.slack.conftest import Clock, mention


def thread(slack: FakeSlack, channel: str) -> list[str]:
    """The thread's messages as they stand, in order."""
    return [m["text"] for m in slack.messages(channel)]


def summary(request: Request) -> Reply:
    account = tool_result(request, "acct")
    (ana,) = [c for c in account["contacts"] if c["name"] == "Ana Lima"]
    others = ", ".join(c["name"] for c in account["contacts"] if c is not ana)
    return Reply(
        text=f"**Ana Lima** is {ana['title']} at [{account['name']}]({account['url']}) "
        f"({account['industry']}, owner {account['owner']}), in {account['crm']}. "
        f"Also there: {others}. [Ana's record]({ana['url']})"
    )


def account_step(request: Request) -> ToolUse:
    (contact,) = tool_result(request, "find")["contacts"]
    return ToolUse("crm_get_account", {"account_id": contact["account_id"]}, "acct")


def ticket_step(request: Request) -> ToolUse:
    (contact,) = tool_result(request, "find")["contacts"]
    return ToolUse(
        "jira_create_issue",
        {
            "summary": f"Call back {contact['name']} ({contact['account_name']})",
            "description": f"Invoice export fails for her team. CRM record: {contact['url']}",
        },
        "create",
    )


def ticket_answer(request: Request) -> Reply:
    created = tool_result(request, "create")
    return Reply(text=f"Done: [{created['key']}]({created['url']}) is open for Ana Lima.")


async def test_the_two_flows_in_a_thread_against_salesforce(
    start_bot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    salesforce: FakeSalesforce,
    clock: Clock,
) -> None:
    bot = start_bot(**salesforce_settings(salesforce), **jira_settings(fake_jira))
    fake_openai.script(
        ToolUse("crm_find_contacts", {"query": "Ana"}, "find"), account_step, summary
    )
    asked = clock.ts()
    await bot.send(mention("C1", asked, "look up Ana, her account, summarise both"))
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Ana Lima* is")), timeout=30)
    (answer,) = answers(fake_slack, "C1", "Ana Lima* is")
    assert answer["thread_ts"] == asked
    assert "Head of Operations at <https://127.0.0.1:" in answer["text"]
    assert "/lightning/r/Account/" in answer["text"] and "|Acme Corp>" in answer["text"]
    assert "owner Maria Silva), in Salesforce" in answer["text"]
    assert "Sean O'Brien" in answer["text"] and "/lightning/r/Contact/" in answer["text"]

    fake_openai.script(
        ToolUse("crm_find_contacts", {"query": "ana.lima@acme.example"}, "find"),
        ticket_step,
        ticket_answer,
    )
    await bot.send(mention("C2", clock.ts(), "find Ana and open a ticket about the invoice export"))
    await fake_slack.wait_for(lambda s: posted_card(s, "C2") is not None, timeout=30)
    card = posted_card(fake_slack, "C2")
    assert card is not None and fake_jira.created == []
    assert "Call back Ana Lima (Acme Corp)" in json.dumps(card["blocks"])
    assert await press(bot, "approve_write", card) == 200
    await fake_slack.wait_for(lambda s: bool(answers(s, "C2", "Done:")), timeout=30)
    await bot.idle()
    assert fake_jira.created == ["TASK-1"]
    (post,) = fake_jira.calls("POST", "/issue$")
    assert "/lightning/r/Contact/" in post.json["fields"]["description"]
    print("\n--- C1 ---\n" + "\n".join(thread(fake_slack, "C1")))
    print("\n--- C2 ---\n" + "\n".join(thread(fake_slack, "C2")))


async def test_a_note_on_a_hubspot_contact_waits_for_go_ahead_and_is_written_once(
    start_bot,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    hubspot: FakeHubSpot,
    clock: Clock,
) -> None:
    bot = start_bot(**hubspot_settings(hubspot))
    found: dict[str, Any] = {}

    def log(request: Request) -> ToolUse:
        (contact,) = tool_result(request, "find")["contacts"]
        found.update(contact)
        text = "Called Anders about the renewal.\nHe wants the security review first."
        return ToolUse("crm_log_note", {"contact_id": contact["id"], "text": text}, "note")

    fake_openai.script(
        ToolUse("crm_find_contacts", {"query": "Anders Holm"}, "find"),
        log,
        lambda request: Reply(
            text=f"Logged on [{found['name']}]({tool_result(request, 'note')['url']})."
        ),
    )
    await bot.send(mention("C3", clock.ts(), "log a note on Anders: renewal, security review"))
    await fake_slack.wait_for(lambda s: posted_card(s, "C3") is not None, timeout=30)
    card = posted_card(fake_slack, "C3")
    assert card is not None
    shown = json.dumps(card["blocks"], ensure_ascii=False)
    heading = f"Log a note on Anders Holm (HubSpot contact {found['id']}): Called Anders"
    assert heading in shown and "Go ahead" in shown
    assert hubspot.notes_of(found["id"]) == []  # nothing written before the press

    assert await press(bot, "approve_write", card) == 200
    await fake_slack.wait_for(lambda s: bool(answers(s, "C3", "Logged on")), timeout=30)
    await press(bot, "approve_write", card)  # a late press does nothing more
    await bot.idle()
    (note,) = hubspot.notes_of(found["id"])
    assert "He wants the security review first." in note["hs_note_body"]
    assert len(hubspot.calls("POST", "/objects/notes$")) == 1
    print("\n--- C3 ---\n" + "\n".join(thread(fake_slack, "C3")))
