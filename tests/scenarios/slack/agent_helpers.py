"""Shared by the agent-experience scenarios: a Jira to create tickets in, the scripted
"find Ana and open a ticket" model, button presses signed as Slack signs them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.slack_server import FakeSlack, block_actions_payload, signed_headers
from tests.scenarios.slack.conftest import SECRET, RunningBot

TICKET = {"summary": "Follow up with Ana", "description": "Call Ana about the renewal."}


def jira_settings(jira: FakeJira, **more: Any) -> dict[str, Any]:
    return {
        "JIRA_URL": jira.url,
        "JIRA_EMAIL": "bot@example.com",
        "JIRA_API_TOKEN": "jira-token",
        "JIRA_PROJECT": "TASK",
        **more,
    }


def last_tool_result(request: Request) -> str:
    messages = request.body.get("messages") or []
    return next((m["content"] for m in reversed(messages) if m.get("role") == "tool"), "")


def answer_with_ticket(request: Request) -> Reply:
    """The model's last word: the ticket it made (or that it did not)."""
    result = json.loads(last_tool_result(request))
    if "key" in result:
        return Reply(text=f"Done: [{result['key']}]({result['url']}) is open for Ana.")
    return Reply(text=f"I did not open a ticket: {result.get('error', '')}")


def script_ticket_flow(model: FakeOpenAI) -> None:
    model.script(
        ToolUse("crm_find_contacts", {"query": "Ana"}, "c1"),
        ToolUse("jira_create_issue", TICKET, "w1"),
        answer_with_ticket,
    )


def card_of(slack: FakeSlack, channel: str) -> dict[str, Any] | None:
    """The newest message of the bot's with Create/Cancel buttons."""
    for message in reversed(slack.messages(channel)):
        for block in message.get("blocks") or []:
            if block["type"] == "actions":
                return message
    return None


def button_value(message: dict[str, Any]) -> str:
    (actions,) = [b for b in message["blocks"] if b["type"] == "actions"]
    return actions["elements"][0]["value"]


def has_card(channel: str) -> Callable[[FakeSlack], bool]:
    return lambda slack: card_of(slack, channel) is not None


def posted_card(slack: FakeSlack, channel: str) -> dict[str, Any] | None:
    """The first card as it was posted, even if it has since been settled or expired."""
    for call in slack.calls_to("chat.postMessage"):
        buttons = any(b["type"] == "actions" for b in call.args.get("blocks") or [])
        if call.ok and call.args["channel"] == channel and buttons:
            return {**call.args, "ts": call.response["ts"]}
    return None


async def press(
    bot: RunningBot | Any,
    action: str,
    message: dict[str, Any],
    *,
    user: str = "U1",
    user_team: str | None = None,
) -> int:
    """Press ``action`` on ``message`` as ``user`` (of workspace ``user_team``, the bot's by
    default): signed block_actions over HTTP."""
    body = block_actions_payload(
        action,
        button_value(message),
        user_id=user,
        user_team_id=user_team,
        channel_id=message["channel"],
        message_ts=message["ts"],
        thread_ts=message.get("thread_ts"),
    )
    status = await bot.post(body, signed_headers(body, SECRET))
    return status if isinstance(status, int) else status.status_code


def answers(slack: FakeSlack, channel: str, needle: str) -> list[dict[str, Any]]:
    return [m for m in slack.messages(channel) if needle in m.get("text", "")]


class CallTimes:
    """When calls reached the fake Slack: polled every few ms (the fake keeps no times)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, Any]] = []

    def poll(self, slack: FakeSlack) -> None:
        calls = slack.calls
        for call in calls[len(self.seen) :]:
            self.seen.append((time.monotonic(), call))

    def of(self, method: str) -> list[tuple[float, Any]]:
        return [(t, c) for t, c in self.seen if c.method == method]
