"""Feedback on answers: every final answer carries Slack's feedback buttons; a press (signed
block_actions over HTTP) stores that person's verdict on that turn (a later press replaces
it, anyone may give theirs), thanks them where only they see it, and shows in the history
documents (the admin API and ``bot history show --json``), the admin pages and ``bot
history list``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.helpers import run_bot
from tests.fakes.openai_server import Fail, FakeOpenAI, Reply
from tests.fakes.slack_server import FakeSlack, block_actions_payload, signed_headers
from tests.scenarios.slack.conftest import SECRET, Clock, RunningBot, dm, mention

ADMIN = "admin-secret-0123456789abcdef0123456"


@pytest.fixture
def bot_database_url(database_url: str) -> str:
    """SQLite, and PostgreSQL when TEST_DATABASE_URL is set."""
    return database_url


def feedback_buttons(message: dict[str, Any]) -> dict[str, Any]:
    (block,) = [b for b in message.get("blocks") or [] if b["type"] == "context_actions"]
    (element,) = block["elements"]
    assert element["type"] == "feedback_buttons"
    return element


async def give(
    bot: RunningBot, answer: dict[str, Any], side: str, *, user: str = "U1", value: str = ""
) -> int:
    """Press the answer's thumbs up (``positive_button``) or down, as ``user``."""
    buttons = feedback_buttons(answer)
    body = block_actions_payload(
        buttons["action_id"],
        value or buttons[side]["value"],
        user_id=user,
        channel_id=answer["channel"],
        message_ts=answer["ts"],
        thread_ts=answer.get("thread_ts"),
        action_type="feedback_buttons",
    )
    return (await bot.post(body, signed_headers(body, SECRET))).status_code


async def answered(slack: FakeSlack, channel: str, text: str) -> dict[str, Any]:
    await slack.wait_for(lambda s: any(text in m["text"] for m in s.messages(channel)))
    return next(m for m in slack.messages(channel) if text in m["text"])


async def admin_document(bot: RunningBot, channel: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(
            f"{bot.url}/admin/api/sessions/{channel}",
            headers={"Authorization": f"Bearer {ADMIN}"},
        )
    assert response.status_code == 200
    return response.json()


async def thanked(slack: FakeSlack, count: int) -> list[dict[str, Any]]:
    await slack.wait_for(lambda s: len(s.ephemeral_messages) >= count)
    return slack.ephemeral_messages


async def test_presses_are_stored_per_person_latest_wins_and_thanked(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
    bot_database_url: str,
    tmp_path: Path,
) -> None:
    bot = start_bot(ADMIN_TOKEN=ADMIN)
    fake_openai.script(Reply(text="TASK-123 is *in progress*."))
    asked = clock.ts()
    await bot.send(mention("C1", asked, "what is TASK-123?"))
    answer = await answered(fake_slack, "C1", "TASK-123 is")
    await bot.idle()

    # the answer itself is the first block; the buttons are under it, naming the turn
    assert answer["blocks"][0]["text"]["text"] == answer["text"]
    buttons = feedback_buttons(answer)
    turn_id = (await admin_document(bot, "C1"))["turns"][0]["id"]
    assert buttons["positive_button"]["value"] == f"positive:{turn_id}"
    assert buttons["negative_button"]["value"] == f"negative:{turn_id}"

    assert await give(bot, answer, "positive_button") == 200
    (thanks,) = await thanked(fake_slack, 1)
    assert thanks["user"] == "U1" and thanks["thread_ts"] == asked
    assert "Thanks for the feedback" in thanks["text"]

    # a change of mind replaces the first verdict; a stranger's is a verdict of their own
    assert await give(bot, answer, "negative_button") == 200
    await thanked(fake_slack, 2)
    assert await give(bot, answer, "positive_button", user="U2") == 200
    *_, stranger = await thanked(fake_slack, 3)
    assert stranger["user"] == "U2"
    await bot.idle()

    (turn,) = (await admin_document(bot, "C1"))["turns"]
    assert [(f["user_id"], f["value"]) for f in turn["feedback"]] == [
        ("U1", "negative"),
        ("U2", "positive"),
    ]
    assert all(f["at"].endswith("Z") for f in turn["feedback"])
    assert {k: turn[k] for k in ("id", "slack_ts", "user_id", "outcome", "rounds", "tools")} == {
        "id": turn_id,
        "slack_ts": asked,
        "user_id": "U1",
        "outcome": "answered",
        "rounds": 0,
        "tools": [],
    }
    assert turn["tokens_in"] > 0 and turn["tokens_out"] > 0 and turn["latency_ms"] >= 0

    # the CLI's document says the same; its list counts the verdicts
    env = {"DATABASE_URL": bot_database_url}
    shown = run_bot("history", "show", "C1", "--json", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert '"value": "negative"' in shown.stdout and '"user_id": "U2"' in shown.stdout
    listed = run_bot("history", "list", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].endswith("👍 1 👎 1")


async def test_a_dm_answer_carries_the_buttons_and_a_bad_press_stores_nothing(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    bot = start_bot(ADMIN_TOKEN=ADMIN)
    fake_openai.script(Reply(text="Hello there."), Reply(text="Elsewhere."))
    await bot.send(dm("D1", clock.ts(), "hi"))
    answer = await answered(fake_slack, "D1", "Hello there.")
    await bot.send(mention("C2", clock.ts(), "and here?"))
    await answered(fake_slack, "C2", "Elsewhere.")
    await bot.idle()
    turn_id = (await admin_document(bot, "D1"))["turns"][0]["id"]
    other = (await admin_document(bot, "C2"))["turns"][0]["id"]

    # a verdict that is neither, a turn id that is not a number, another channel's turn
    for value in (f"maybe:{turn_id}", "positive:12a", f"positive:{other}", "positive"):
        assert await give(bot, answer, "positive_button", value=value) == 200
    await bot.idle()

    assert fake_slack.ephemeral_messages == []
    assert (await admin_document(bot, "D1"))["turns"][0]["feedback"] == []
    assert (await admin_document(bot, "C2"))["turns"][0]["feedback"] == []


async def test_no_buttons_under_a_failure(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.responder = lambda request: Fail(400, "bad request")  # the turn fails
    await bot.send(mention("C1", clock.ts(), "fail"))
    await fake_slack.wait_for(lambda s: bool(s.messages("C1")))
    await bot.idle()

    (failure,) = fake_slack.messages("C1")
    assert "went wrong" in failure["text"] or "model" in failure["text"]
    assert not any(b["type"] == "context_actions" for b in failure.get("blocks") or [])


async def test_a_streamed_answer_ends_with_the_buttons_too(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    bot = start_bot(STREAM_ANSWERS=True)
    fake_openai.script(Reply(text="Streamed, then rated."))
    await bot.send(mention("C1", clock.ts(), "stream it"))
    await fake_slack.wait_for(
        lambda s: any(
            "Streamed, then rated." in m["text"] and not m.get("streaming")
            for m in s.messages("C1")
        )
    )
    await bot.idle()

    (answer,) = [m for m in fake_slack.messages("C1") if "Streamed" in m["text"]]
    assert feedback_buttons(answer)["positive_button"]["value"].startswith("positive:")
