"""The three flows end to end through ``bot ask``: a scripted model over the strict fake
OpenAI server, the real CRM tables with the example CSVs, and the strict fake Jira."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import load_examples, run_bot
from tests.cli.test_core_commands import model_env, stored
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse


@pytest.fixture
def jira():  # type: ignore[no-untyped-def]
    with FakeJira(email="bot@example.com", api_token="jira-secret", projects={"TASK": {}}) as fake:
        fake.add_issue(
            "TASK-123",
            summary="Invoice export fails",
            status="In Progress",
            description="Exports of March invoices time out.",
        )
        yield fake


def jira_env(
    database_url: str, fake_openai: FakeOpenAI, jira: FakeJira, **extra: str
) -> dict[str, str]:
    """The settings of a ``bot ask`` with the fake model and the fake Jira (project TASK)."""
    return model_env(
        fake_openai,
        database_url,
        JIRA_URL=jira.url,
        JIRA_EMAIL="bot@example.com",
        JIRA_API_TOKEN="jira-secret",
        JIRA_PROJECT="TASK",
        **extra,
    )


@pytest.fixture
def env(database_url: str, fake_openai: FakeOpenAI, jira: FakeJira):  # type: ignore[no-untyped-def]
    load_examples(database_url)
    return jira_env(database_url, fake_openai, jira)


def tool_result(request, call_id: str) -> dict:  # type: ignore[no-untyped-def]
    """The result the model was sent for ``call_id``, in either API mode."""
    for item in request.body.get("messages") or request.body.get("input"):
        if item.get("tool_call_id") == call_id:
            return json.loads(item["content"])
        if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
            return json.loads(item["output"])
    raise AssertionError(f"no result for {call_id}")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_contact_then_account_then_summary(
    env, fake_openai: FakeOpenAI, tmp_path, api: str
) -> None:
    def model(request):  # type: ignore[no-untyped-def]
        step = len(fake_openai.requests)
        if step == 1:
            return ToolUse("crm_find_contacts", {"query": "Ana"}, "find")
        if step == 2:
            (contact,) = tool_result(request, "find")["contacts"]
            return ToolUse("crm_get_account", {"account_id": contact["account_id"]}, "acct")
        account = tool_result(request, "acct")
        return Reply(
            text=f"Ana Lima is Head of Operations at {account['name']} "
            f"({account['tier']}, owner {account['owner']})."
        )

    fake_openai.responder = model
    result = run_bot(
        "ask",
        "--channel",
        "C1",
        "Look up Ana, her account, summarise both",
        env={**env, "LLM_API": api},
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "Ana Lima is Head of Operations at Acme Corp (Enterprise, owner Maria Silva)."
    )
    messages, (turn,) = stored(env["DATABASE_URL"], "C1")
    assert [m.name for m in messages if m.role == "tool"] == [
        "crm_find_contacts",
        "crm_get_account",
    ]
    assert turn.tools_called == ["crm_find_contacts", "crm_get_account"] and turn.rounds == 2


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_contact_then_new_ticket(
    env, fake_openai: FakeOpenAI, jira: FakeJira, tmp_path, api: str
) -> None:
    def model(request):  # type: ignore[no-untyped-def]
        step = len(fake_openai.requests)
        if step == 1:
            return ToolUse("crm_find_contacts", {"query": "ana.lima@acme.example"}, "find")
        if step == 2:
            (contact,) = tool_result(request, "find")["contacts"]
            return ToolUse(
                "jira_create_issue",
                {
                    "summary": f"Call back {contact['name']} ({contact['account_name']})",
                    "description": "Invoice export fails for her team.",
                },
                "create",
            )
        created = tool_result(request, "create")
        return Reply(text=f"Created {created['key']}: {created['url']}")

    fake_openai.responder = model
    result = run_bot(
        "ask",
        "--channel",
        "C2",
        "--approve",
        "find Ana and open a ticket",
        env={**env, "LLM_API": api},
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Created TASK-124: {jira.url}/browse/TASK-124"
    assert jira.created == ["TASK-124"]
    (post,) = jira.calls("POST", "/issue$")
    assert post.json["fields"]["summary"] == "Call back Ana Lima (Acme Corp)"
    assert post.json["fields"]["project"] == {"key": "TASK"}
    messages, _ = stored(env["DATABASE_URL"], "C2")
    assert json.loads(messages[-2].content)["key"] == "TASK-124"


def test_ticket_is_not_created_without_approval(
    env, fake_openai: FakeOpenAI, jira: FakeJira, tmp_path
) -> None:
    fake_openai.script(
        ToolUse("jira_create_issue", {"summary": "x", "description": "y"}, "create"),
        lambda request: Reply(text=tool_result(request, "create")["error"]),
    )
    result = run_bot("ask", "--channel", "C3", "open a ticket", env=env, cwd=tmp_path)
    assert result.returncode == 0
    assert "needs approval" in result.stdout and "--approve" in result.stdout
    assert jira.created == [] and not jira.calls("POST", "/issue$")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_status_of_an_issue(
    env, fake_openai: FakeOpenAI, jira: FakeJira, tmp_path, api: str
) -> None:
    fake_openai.script(
        ToolUse("jira_get_issue", {"issue_key": "TASK-123"}, "get"),
        lambda request: Reply(text=f"TASK-123 is {tool_result(request, 'get')['status']}."),
    )
    result = run_bot(
        "ask",
        "--channel",
        "C4",
        "what is the status of TASK-123?",
        env={**env, "LLM_API": api},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "TASK-123 is In Progress."
    assert jira.calls("GET", "/issue/TASK-123")
    assert {r.auth for r in jira.calls("GET")} == {"basic"}


def test_without_jira_url_the_jira_tools_are_not_offered(
    env, fake_openai: FakeOpenAI, tmp_path
) -> None:
    fake_openai.script("No Jira here.")
    values = {k: v for k, v in env.items() if not k.startswith("JIRA_")}
    result = run_bot("ask", "--channel", "C5", "hi", env=values, cwd=tmp_path)
    assert result.returncode == 0
    offered = fake_openai.requests[0].tool_names
    assert "crm_find_contacts" in offered and not any(n.startswith("jira") for n in offered)
