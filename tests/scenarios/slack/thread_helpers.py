"""What the thread scenarios share: the people of the threads, a thread of three in a
channel, a question asked in it (or a reply there), and what the model was sent."""

from __future__ import annotations

from typing import Any

from tests.fakes.openai_server import Request
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import BOT, Clock, RunningBot, turn_finished

BOB, CAROL, ALICE = "UBOB", "UCAROL", "UALICE"


def name_people(fake_slack: FakeSlack) -> None:
    """Bob, Carol and Alice, as Slack's users.info names them."""
    for user, name in ((BOB, "Bob"), (CAROL, "Carol"), (ALICE, "Alice")):
        fake_slack.users[user] = {"display_name": name}


def said(request: Request) -> str:
    """The newest user message of a model request (either API mode)."""
    conversation = request.body.get("messages") or request.body.get("input") or []
    for item in reversed(conversation):
        if item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def in_thread(
    channel: str, ts: str, parent: str, text: str, user: str = ALICE, *, mention: bool = True
) -> dict[str, Any]:
    """A reply in a thread, as Slack sends it: an app_mention, or a plain message."""
    if mention:
        return {
            "type": "app_mention",
            "channel": channel,
            "user": user,
            "text": f"<@{BOT}> {text}",
            "ts": ts,
            "thread_ts": parent,
        }
    return {
        "type": "message",
        "channel": channel,
        "channel_type": "channel",
        "user": user,
        "text": text,
        "ts": ts,
        "thread_ts": parent,
    }


def thread_of_three(fake_slack: FakeSlack, clock: Clock, channel: str = "C1") -> str:
    parent = fake_slack.add_message(
        channel, "The invoice export is failing for ACME", user=BOB, ts=clock.ts()
    )
    fake_slack.add_message(
        channel, "same here since Tuesday", user=CAROL, ts=clock.ts(), thread_ts=parent
    )
    return parent


async def ask(
    bot: RunningBot, fake_slack: FakeSlack, event: dict[str, Any], *, in_slack: bool = True
) -> None:
    """Post ``event``'s message in the fake Slack (as it is there), deliver it, wait."""
    if in_slack:
        fake_slack.add_message(
            event["channel"],
            event["text"],
            user=event["user"],
            ts=event["ts"],
            thread_ts=event.get("thread_ts"),
        )
    assert (await bot.send(event)).status_code == 200
    await fake_slack.wait_for(turn_finished(event["channel"], event["ts"]))
    await bot.idle()


async def asked_in_a_thread(bot: RunningBot, fake_slack: FakeSlack, clock: Clock) -> str:
    """Alice's question in the thread of three of C1, answered; the thread's parent ts."""
    parent = thread_of_three(fake_slack, clock)
    await ask(bot, fake_slack, in_thread("C1", clock.ts(), parent, "open a ticket for this"))
    return parent


def reply_of_alice(
    clock: Clock, parent: str, text: str = "and assign it to Carol"
) -> dict[str, Any]:
    """Alice's reply in the thread, without a mention (a follow-up, where they apply)."""
    return in_thread("C1", clock.ts(), parent, text, mention=False)
