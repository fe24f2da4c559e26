"""While a turn runs with STREAM_ANSWERS=off: its steps live at Slack's pace, the assistant
pane's prompts, title and status, and Continue after the round cap (streamed answers: see
test_streaming)."""

from __future__ import annotations

import asyncio
import itertools

from tests.fakes.openai_server import FakeOpenAI, ToolUse
from tests.fakes.slack_server import FakeSlack, event_payload, signed_headers
from tests.scenarios.slack.agent_helpers import CallTimes, answers, press
from tests.scenarios.slack.conftest import SECRET, Clock, dm, mention, turn_finished

LONG = "**Ana** works at [Acme](https://acme.example). " * 40 + "\n\n- one\n- two"


async def test_steps_are_shown_at_most_once_a_second_and_cleaned_up(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot()
    fake_openai.latency = 0.6
    names = ["Ana", "Bo", "Cy", "Di"]
    fake_openai.script(*(ToolUse("crm_find_contacts", {"query": n}) for n in names), "Found them.")
    times = CallTimes()
    ts = clock.ts()

    await bot.send(mention("C1", ts, "find them all"))
    while not turn_finished("C1", ts)(fake_slack):
        times.poll(fake_slack)
        await asyncio.sleep(0.005)

    edits = times.of("chat.postMessage") + times.of("chat.update")
    live = sorted(t for t, c in edits if "Searching" in c.args["text"])
    assert len(live) >= 3
    assert all(b - a >= 0.95 for a, b in itertools.pairwise(live))
    (update, *_) = fake_slack.calls_to("chat.update")
    assert "Searching contacts for" in update.args["text"]
    # only the question's answer is left in the thread
    assert [m["text"] for m in fake_slack.messages("C1")] == ["Found them."]


async def test_continue_after_the_round_cap_goes_on_once(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot(MAX_TOOL_ROUNDS=1)
    fake_openai.script(ToolUse("get_current_time", {}), "So far: I checked the time.", "All done.")
    ts = clock.ts()
    await bot.send(mention("C1", ts, "dig deep"))
    await fake_slack.wait_for(turn_finished("C1", ts))
    (offer,) = answers(fake_slack, "C1", "Shall I keep going?")

    await press(bot, "continue_turn", offer, user="U2")
    await fake_slack.wait_for(lambda s: bool(s.ephemeral_messages))
    await asyncio.gather(press(bot, "continue_turn", offer), press(bot, "continue_turn", offer))

    await fake_slack.wait_for(lambda s: bool(answers(s, "C1", "All done.")))
    await bot.idle()
    assert len(answers(fake_slack, "C1", "All done.")) == 1
    assert len(fake_openai.requests) == 3
    assert answers(fake_slack, "C1", "Continued by <@U1>")


async def test_the_agent_dm_suggests_prompts_titles_its_threads_and_shows_status(
    start_bot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    bot = start_bot()
    opened = {
        "type": "app_home_opened",
        "user": "U1",
        "channel": "D1",
        "tab": "messages",
        "event_ts": clock.ts(),
    }
    body = event_payload(opened)
    await bot.post(body, signed_headers(body, SECRET))
    await fake_slack.wait_for(lambda s: ("D1", "") in s.suggested_prompts)
    prompts = [p["message"] for p in fake_slack.suggested_prompts[("D1", "")]]
    assert prompts == [
        "Look up Ana and summarise her account",
        "Find Ana and open a ticket for her",
        "What is the status of TASK-123?",
    ]
    (call,) = fake_slack.calls_to("assistant.threads.setSuggestedPrompts")
    assert "thread_ts" not in call.args  # pinned to the DM, not to a thread
    home = {**opened, "tab": "home", "event_ts": clock.ts()}
    body = event_payload(home)
    await bot.post(body, signed_headers(body, SECRET))

    fake_openai.script(ToolUse("jira_get_issue", {"issue_key": "TASK-123"}), "It is open.")
    ts = clock.ts()
    await bot.send(dm("D1", ts, "What is the status of TASK-123?", thread_ts="1.000100"))
    await fake_slack.wait_for(turn_finished("D1", ts))

    assert fake_slack.thread_titles[("D1", "1.000100")] == "What is the status of TASK-123?"
    assert len(fake_slack.calls_to("assistant.threads.setSuggestedPrompts")) == 1  # not home
    # the step was shown in the pane's status line while it ran (in the order Slack got them)
    statuses = [
        c.args["status"]
        for c in fake_slack.calls_to("assistant.threads.setStatus")
        if c.args.get("thread_ts") == "1.000100"
    ]
    assert any("TASK-123" in s or "jira_get_issue" in s for s in statuses[:-1])
    assert statuses[-1] == ""
    assert fake_slack.assistant_status[("D1", "1.000100")] == ""
    (answer,) = answers(fake_slack, "D1", "It is open.")
    assert answer["thread_ts"] == "1.000100"
