"""An MCP server's tools asked for in Slack (the fake MCP server over stdio, the SDK's own
server side): a read answers from it; a write waits for the card's button and runs once
when pressed, the server seeing no call before."""

from __future__ import annotations

import json

from tests.fakes.mcp_fake import Recording, stdio_entry, write_config
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.reliability.helpers import until
from tests.scenarios.slack.agent_helpers import answers, posted_card, press
from tests.scenarios.slack.conftest import Clock, mention


async def test_a_read_answers_and_a_write_waits_for_its_button_and_runs_once(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock, tmp_path
) -> None:
    recording = Recording(tmp_path / "calls.jsonl")
    config = write_config(tmp_path, {"fake": stdio_entry(recording)})
    bot = start_bot(MCP_CONFIG=str(config))
    # the server connects in the background once the bot serves (the bot answers meanwhile)
    tools = bot.runtime.services.registry
    await until(lambda: "fake__lookup" in tools, "the MCP server's tools", timeout=30)
    fake_openai.script(
        ToolUse("fake__lookup", {"key": "T-1"}, "r1"),
        lambda request: Reply(text="Looked up: " + json.dumps(request.body)[-80:]),
    )
    await bot.send(mention("C1", clock.ts(), "look T-1 up"))
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Looked up")), timeout=30)
    assert recording.tools() == ["lookup"]

    fake_openai.script(
        ToolUse("fake__create_ticket", {"summary": "Printer on fire"}, "w1"),
        Reply(text="Ticket made."),
    )
    await bot.send(mention("C1", clock.ts(), "make a ticket"))
    await fake_slack.wait_for(lambda s: posted_card(s, "C1") is not None, timeout=30)
    card = posted_card(fake_slack, "C1")
    assert card is not None
    shown = json.dumps(card["blocks"])
    assert "fake" in shown and "create_ticket" in shown and "Printer on fire" in shown
    assert "Go ahead" in shown and "Create" not in shown.replace("create_ticket", "")
    assert recording.tools() == ["lookup"]  # nothing written before the press

    assert await press(bot, "approve_write", card) == 200
    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "Ticket made.")), timeout=30)
    await bot.idle()
    assert recording.tools() == ["lookup", "create_ticket"]
