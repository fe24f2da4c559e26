"""Shared by the Jira write scenarios: a fake Jira of either deployment with its people, the
bot's settings for it, a scripted model that plays each question's rounds, and the thread
as a person reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import Reply, Request, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.reliability.helpers import last_user_text

EMAIL, TOKEN, PAT = "bot@example.com", "jira-token", "jira-pat"
#: the Slack people of these scenarios: who asks (U1), and Carol, mentioned
SLACK_PEOPLE = {
    "U1": {"real_name": "Ann Asker", "email": "ann@example.com"},
    "UCAROL": {"real_name": "Carol D.", "email": "carol@example.com"},
}
Step = Reply | ToolUse | Callable[[Request], Reply | ToolUse]


def jira_of(deployment: str) -> FakeJira:
    """A fake Jira with TASK (and SEC, which the bot may not write to), three issues and the
    people of the scenarios; its "Done" needs a resolution."""
    auth: dict[str, Any] = (
        {"email": EMAIL, "api_token": TOKEN} if deployment == "Cloud" else {"pat": PAT}
    )
    jira = FakeJira(**auth, projects={"TASK": {}, "SEC": {}}, screens={"Done": ["resolution"]})
    jira.add_user("Carol Diaz", "carol@example.com", name="cdiaz")
    jira.add_user("Carol King", "king@example.com", name="cking")
    jira.add_user("Ann Asker", "ann@example.com", name="ann")
    jira.add_issue("TASK-1", summary="Export fails", status="In Progress")
    jira.add_issue("TASK-2", summary="Import is slow")
    jira.add_issue("TASK-3", summary="Billing epic", issue_type="Epic")
    jira.add_issue("SEC-1", summary="Audit")
    return jira


def jira_env(jira: FakeJira, **more: Any) -> dict[str, Any]:
    auth: dict[str, Any] = (
        {"JIRA_EMAIL": EMAIL, "JIRA_API_TOKEN": TOKEN}
        if jira.deployment == "Cloud"
        else {"JIRA_PAT": PAT}
    )
    return {"JIRA_URL": jira.url, "JIRA_PROJECT": "TASK", **auth, **more}


def with_people(slack: FakeSlack) -> FakeSlack:
    slack.users.update(SLACK_PEOPLE)
    return slack


def rounds_done(request: Request) -> int:
    """The tool rounds of the turn so far (after its question)."""
    messages = request.body.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return sum(
        1 for m in messages[last_user + 1 :] if m.get("role") == "assistant" and m.get("tool_calls")
    )


def tool_results(request: Request) -> list[dict[str, Any]]:
    """The results of the turn's newest round, in call order."""
    messages = request.body.get("messages") or []
    results: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, json.loads(message["content"]))
    return results


def reporting(request: Request) -> Reply:
    """The model's last word: what each call of the round gave, as it would tell it."""
    said = []
    for result in tool_results(request):
        if "error" in result:
            said.append(f"Not done: {result['error']}")
        else:
            said.append("Done: " + ", ".join(f"{k} {v}" for k, v in result.items() if k != "url"))
    return Reply(text="\n".join(said))


def playing(plans: dict[str, list[Step]]) -> Callable[[Request], Reply | ToolUse]:
    """A model that answers each question (a key of ``plans``, the text the person wrote)
    with its steps, one a round."""

    def respond(request: Request) -> Reply | ToolUse:
        steps = plans[last_user_text(request)]
        step = steps[min(rounds_done(request), len(steps) - 1)]
        return step(request) if callable(step) else step

    return respond


def as_read(slack: FakeSlack, channel: str) -> str:
    """The channel's messages as a person reads them: each message's text, a card's
    sections and its buttons or verdict."""
    lines = []
    for message in slack.messages(channel):
        blocks = message.get("blocks") or []
        shown = [b for b in blocks if b["type"] in ("section", "context", "actions")]
        if not any(b.get("fields") for b in shown):  # an answer, not a card
            lines.append(f"bot: {message['text']}")
            continue
        lines.append("bot (card):")
        for block in shown:
            if block["type"] == "section":
                lines.append(f"  {block['text']['text']}")
                for item in block.get("fields") or []:
                    lines.append("    " + item["text"].replace("\n", ": ", 1))
            elif block["type"] == "context":
                lines.append("  " + " ".join(e.get("text", "") for e in block["elements"]))
            else:
                buttons = " ".join(f"[{e['text']['text']}]" for e in block["elements"])
                lines.append(f"  {buttons}")
    return "\n".join(lines)


def jira_writes(jira: FakeJira) -> list[str]:
    """Every request that changes Jira, as "METHOD path"."""
    changes = [r for r in jira.requests if r.method in ("POST", "PUT")]
    return [f"{r.method} {r.path}" for r in changes if "/search" not in r.path]
