"""The Jira writes as a person meets them in Slack, on SQLite and PostgreSQL, Cloud and
Server: each write waits on a card that says the change in words, nothing reaches Jira
before the press, and it is done once after it; the refusals say what to do instead."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.helpers import run_bot
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import answers, card_of, press
from tests.scenarios.slack.conftest import Clock, RunningBot, mention
from tests.scenarios.slack.jira_helpers import (
    Step,
    as_read,
    jira_env,
    jira_of,
    jira_writes,
    playing,
    reporting,
    tool_results,
    with_people,
)

pytestmark = pytest.mark.timeout(120)
ADMIN_TOKEN = "a" * 40


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    return database_url  # SQLite, and PostgreSQL when TEST_DATABASE_URL is set


@pytest.fixture(params=["Cloud", "Server"])
def jira(request: pytest.FixtureRequest) -> Iterator[FakeJira]:
    with jira_of(request.param) as fake:
        yield fake


def told_in(slack: FakeSlack, channel: str) -> list[dict[str, Any]]:
    """The model's answers in ``channel`` (see jira_helpers.reporting)."""
    return [m for m in slack.messages(channel) if m["text"].startswith(("Done:", "Not done:"))]


async def approved(
    bot: RunningBot, slack: FakeSlack, jira: FakeJira, clock: Clock, asked: dict[str, str]
) -> dict[str, str]:
    """Ask each question (by channel) at once, wait for every card, check that Jira was
    not written to, press Go ahead on each, wait for the answers: each card's heading."""
    before = jira_writes(jira)
    for channel, question in asked.items():
        assert (await bot.send(mention(channel, clock.ts(), question))).status_code == 200
    await slack.wait_for(lambda s: all(card_of(s, c) for c in asked), timeout=20)
    assert jira_writes(jira) == before  # nothing written before the press
    headings = {}
    for channel in asked:
        card = card_of(slack, channel)
        assert card is not None
        headings[channel] = next(b for b in card["blocks"][1:] if b["type"] == "section")["text"][
            "text"
        ]
        await press(bot, "approve_write", card)
    await slack.wait_for(lambda s: all(told_in(s, c) for c in asked), timeout=20)
    await bot.idle(15)
    return headings


async def test_each_write_waits_for_its_card_and_is_done_once(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    jira: FakeJira,
    clock: Clock,
) -> None:
    with_people(fake_slack)
    cases: list[tuple[str, ToolUse, str, list[str]]] = [
        (
            "note on TASK-1 that the export works again",
            ToolUse("jira_add_comment", {"issue_key": "TASK-1", "body": "The export works again."}),
            "*Comment on TASK-1: “The export works again.”*",
            ["POST /rest/api/{v}/issue/TASK-1/comment"],
        ),
        (
            "assign TASK-1 to <@UCAROL>",
            ToolUse("jira_assign_issue", {"issue_key": "TASK-1", "assignee": "<@UCAROL>"}),
            "*Assign TASK-1 to Carol Diaz*",
            ["PUT /rest/api/2/issue/TASK-1/assignee"],
        ),
        (
            "start TASK-2",
            ToolUse("jira_transition_issue", {"issue_key": "TASK-2", "status": "In Progress"}),
            "*Move TASK-2 from To Do to In Progress*",
            ["POST /rest/api/2/issue/TASK-2/transitions"],
        ),
        (
            "TASK-2 is urgent",
            ToolUse("jira_update_issue", {"issue_key": "TASK-2", "priority": "Highest"}),
            "*Update TASK-2: priority Medium → Highest*",
            ["PUT /rest/api/{v}/issue/TASK-2"],
        ),
        (
            "TASK-1 blocks TASK-2",
            ToolUse(
                "jira_link_issues",
                {"issue_key": "TASK-1", "other_issue_key": "TASK-2", "link_type": "blocks"},
            ),
            "*Link TASK-1 to TASK-2: TASK-1 blocks TASK-2*",
            ["POST /rest/api/2/issueLink"],
        ),
    ]
    plans: dict[str, list[Step]] = {q: [call, reporting] for q, call, _, _ in cases}
    plans["hello"] = [Reply(text="Hello! Ask me about Jira.")]
    bot = start_bot(**jira_env(jira), WRITE_APPROVAL="on")
    fake_openai.responder = playing(plans)
    # a turn that writes nothing asks nothing of Jira, nor of Slack about people
    await bot.send(mention("CW", clock.ts(), "hello"))
    await fake_slack.wait_for(lambda s: bool(answers(s, "CW", "Hello!")), timeout=15)
    assert jira.requests == [] and not fake_slack.calls_to("users.info")
    version = "3" if jira.deployment == "Cloud" else "2"

    asked = {f"CW{number}": question for number, (question, *_) in enumerate(cases)}
    headings = await approved(bot, fake_slack, jira, clock, asked)
    assert list(headings.values()) == [heading for _, _, heading, _ in cases]
    # each written once, after its press
    expected = [w.format(v=version) for *_, writes in cases for w in writes]
    assert sorted(jira_writes(jira)) == sorted(expected)
    for channel in asked:
        (answer,) = told_in(fake_slack, channel)
        assert answer["text"].startswith("Done:"), answer["text"]

    (comment,) = jira.comments_of("TASK-1")
    assert "From Slack, for Ann Asker:" in json.dumps(comment["body"])
    issue_1, issue_2 = jira.issues["TASK-1"], jira.issues["TASK-2"]
    assert (issue_1["assignee"], issue_2["status"], issue_2["priority"]) == (
        "Carol Diaz",
        "In Progress",
        "Highest",
    )
    assert jira.links == [{"type": "Blocks", "inward": "TASK-1", "outward": "TASK-2"}]


async def test_a_ticket_assigned_and_linked_in_one_thread(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    jira: FakeJira,
    clock: Clock,
    bot_database_url: str,
    tmp_path: Path,
) -> None:
    """ "open a ticket for this, assign it to @Carol and link it to TASK-3": the create's
    card, then one card for the assignment and the link, then the answer; the admin page
    and ``bot history show`` say whose request each write was."""
    with_people(fake_slack)
    question = "open a ticket for this, assign it to <@UCAROL> and link it to TASK-3"

    def assign_and_link(request: Request) -> Reply:
        key = tool_results(request)[0]["key"]
        return Reply(
            tool_calls=[
                ToolUse("jira_assign_issue", {"issue_key": key, "assignee": "<@UCAROL>"}, "a1"),
                ToolUse(
                    "jira_link_issues",
                    {"issue_key": key, "other_issue_key": "TASK-3", "link_type": "relates to"},
                    "l1",
                ),
            ]
        )

    def answer(request: Request) -> Reply:
        assigned, linked = tool_results(request)
        return Reply(
            text=f"Done: {assigned['key']} is assigned to {assigned['assignee']}, and "
            f"{linked['link']}."
        )

    create = ToolUse(
        "jira_create_issue",
        {"summary": "Invoices export twice", "description": "Seen by **Acme** on Monday."},
        "c1",
    )
    fake_openai.responder = playing({question: [create, assign_and_link, answer]})
    bot = start_bot(**jira_env(jira), WRITE_APPROVAL="on", ADMIN_TOKEN=ADMIN_TOKEN)
    ts = clock.ts()

    assert (await bot.send(mention("CT", ts, question))).status_code == 200
    await fake_slack.wait_for(lambda s: card_of(s, "CT") is not None, timeout=15)
    first = card_of(fake_slack, "CT")
    assert first is not None and jira_writes(jira) == []
    await press(bot, "approve_write", first)
    await fake_slack.wait_for(lambda s: card_of(s, "CT") not in (None, first), timeout=15)
    second = card_of(fake_slack, "CT")
    assert second is not None
    # tried with Ann as reporter first, which this Jira refuses the bot: then without
    assert jira_writes(jira) == ["POST /rest/api/2/issue"] * 2 and len(jira.created) == 1
    await press(bot, "approve_write", second)
    await fake_slack.wait_for(lambda s: bool(answers(s, "CT", "Done:")), timeout=15)
    await bot.idle(15)

    key = jira.created[0]
    thread = as_read(fake_slack, "CT")
    print(f"\n---- the thread, as read ({jira.deployment})\n{thread}")  # for the report
    assert "*Create a Task in TASK: “Invoices export twice”*" in thread
    assert f"*Assign {key} to Carol Diaz*" in thread
    assert f"*Link {key} to TASK-3: {key} relates to TASK-3*" in thread
    assert f"Done: {key} is assigned to Carol Diaz, and {key} relates to TASK-3." in thread
    assert thread.count("Approved by <@U1>") == 2
    assert all(m.get("thread_ts") == ts for m in fake_slack.messages("CT"))
    issue = jira.issues[key]
    assert issue["assignee"] == "Carol Diaz"
    assert jira.links == [{"type": "Relates", "inward": key, "outward": "TASK-3"}]
    # the asker is its reporter where Jira lets the bot say so; here the description says it
    assert issue["description"].startswith("Asked in Slack by Ann Asker.\n\nSeen by *Acme*")
    assert len(jira_writes(jira)) == 4

    # whose request each write was, on the admin page and in bot history show
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as http:
        page = (await http.get(f"{bot.url}/admin/sessions/CT")).text
    assert page.count('<span class="for">for U1 (Ann Asker)</span>') == 3
    assert f"Assign {key} to Carol Diaz</div>" in page
    if jira.deployment == "Cloud":  # one process is enough to show the CLI says it too
        shown = await asyncio.to_thread(
            run_bot, "history", "show", "CT", env={"DATABASE_URL": bot_database_url}, cwd=tmp_path
        )
        assert shown.returncode == 0, shown.stderr
        print(f"---- bot history show CT\n{shown.stdout}")  # for the report
        assert shown.stdout.count("(a1) for U1 (Ann Asker) with") == 1
        assert f"      Assign {key} to Carol Diaz" in shown.stdout


async def test_what_a_write_cannot_do_is_said_and_nothing_changes(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    jira: FakeJira,
    clock: Clock,
) -> None:
    with_people(fake_slack)
    ambiguous = "give TASK-2 to carol"
    calls = {
        ambiguous: ("jira_assign_issue", {"issue_key": "TASK-2", "assignee": "carol"}),
        "by email": ("jira_assign_issue", {"issue_key": "TASK-2", "assignee": "king@example.com"}),
        "ship TASK-2": ("jira_transition_issue", {"issue_key": "TASK-2", "status": "Shipped"}),
        "close TASK-2": ("jira_transition_issue", {"issue_key": "TASK-2", "status": "Done"}),
        "comment on SEC-1": ("jira_add_comment", {"issue_key": "SEC-1", "body": "hi"}),
        "link TASK-1 to SEC-1": (
            "jira_link_issues",
            {"issue_key": "TASK-1", "other_issue_key": "SEC-1", "link_type": "blocks"},
        ),
    }
    plans: dict[str, list[Step]] = {q: [ToolUse(*call), reporting] for q, call in calls.items()}
    fake_openai.responder = playing(plans)
    bot = start_bot(**jira_env(jira), WRITE_APPROVAL="on")

    asked = {
        "CA": ambiguous,
        "CS": "ship TASK-2",
        "CD": "close TASK-2",
        "CP": "comment on SEC-1",
        "CL": "link TASK-1 to SEC-1",
    }
    headings = await approved(bot, fake_slack, jira, clock, asked)
    # an ambiguous name: the card says so already, and the press changes nothing
    assert headings["CA"].startswith("*Assign TASK-2 to carol: Several people named 'carol'")
    expected = {
        "CA": "Carol Diaz (carol@example.com); Carol King (king@example.com)",
        "CS": "cannot move to 'Shipped'. It can move to: Done, In Progress.",
        "CD": "Moving TASK-2 to Done needs Resolution, which the bot cannot fill",
        "CP": "Changing issues in project SEC is not allowed (SEC-1)",
        "CL": "Changing issues in project SEC is not allowed (SEC-1)",
    }
    for channel, said in expected.items():
        (told,) = told_in(fake_slack, channel)
        assert told["text"].startswith("Not done") and said in told["text"], channel
    assert jira_writes(jira) == []
    # the same person by email is exact
    headings = await approved(bot, fake_slack, jira, clock, {"CE": "by email"})
    assert headings == {"CE": "*Assign TASK-2 to Carol King*"}
    assert jira_writes(jira) == ["PUT /rest/api/2/issue/TASK-2/assignee"]
    assert jira.issues["TASK-2"]["status"] == "To Do"
    assert not any("SEC-1" in r.path for r in jira.requests)


async def test_read_only_jira_offers_no_write(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    jira: FakeJira,
    clock: Clock,
) -> None:
    fake_openai.responder = lambda request: Reply(text="I can only read Jira here.")
    bot = start_bot(**jira_env(jira), JIRA_READ_ONLY="on")
    await bot.send(mention("CR", clock.ts(), "assign TASK-1 to me"))
    await fake_slack.wait_for(lambda s: bool(answers(s, "CR", "only read")), timeout=15)
    offered: list[Any] = [t["function"]["name"] for t in fake_openai.requests[-1].body["tools"]]
    assert [n for n in offered if n.startswith("jira_")] == ["jira_get_issue", "jira_search_issues"]
    assert jira.requests == []  # and a turn that writes nothing asks Jira nothing
