"""What the Jira writes' caches buy: the people (a Slack user's profile, the Jira user with
their email) and the instance's link types, kept a few minutes.

An approved write asks its question twice (the card's words when the turn pauses, the
write after the press), a write taken over a third time (its lookup), and a busy person
writes again within minutes. Each round here is one approved assignment by Slack mention
(preview, then the write) and one approved link (preview, then the write), through the
registry, against the fake Slack (users.info through slack_sdk) and the fake Jira (the
``jira`` client) over HTTP on 127.0.0.1; "off" clears the caches before every call.

    uv run python bench/jira_people.py [--rounds 50] [--runs 3]

Prints, per run, alternating on and off: requests to Slack and to Jira a round, and the
median milliseconds a round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.config import load_settings
from bot.messages import ToolCall
from bot.people import People
from bot.slack.people import SlackPeople
from bot.tools.base import ToolRegistry
from bot.tools.jira import jira_tools, jira_writes
from bot.tools.jira.link import JiraLinks
from bot.turn import turn_channel
from tests.fakes.jira_server import FakeJira
from tests.fakes.slack_server import FakeSlack


async def run(rounds: int, cached: bool, jira: FakeJira, slack: FakeSlack) -> tuple[float, ...]:
    settings = load_settings(
        _env_file=None,
        JIRA_URL=jira.url,
        JIRA_EMAIL="bot@example.com",
        JIRA_API_TOKEN="tok",
        JIRA_PROJECT="TASK",
    )
    async with aiohttp.ClientSession() as session:
        client = AsyncWebClient(token="xoxb-bench", base_url=slack.api_url, session=session)
        people = People()
        slack_people = SlackPeople(client)
        people.use(slack_people)
        tools = jira_tools(settings.jira, 30.0, people=people)
        assert tools is not None
        registry = ToolRegistry(default_timeout=30.0)
        registry.add_object(tools)
        writes = jira_writes(tools)
        for kind in writes:
            registry.add_object(kind)
        links = next(w for w in writes if isinstance(w, JiraLinks))

        def forget() -> None:
            if not cached:
                slack_people._known.clear()
                tools.users._by_email.clear()
                links._types.clear()

        slack_before, jira_before = len(slack.calls), len(jira.requests)
        times = []
        for number in range(rounds):
            assign = ToolCall(
                f"a{number}",
                "jira_assign_issue",
                json.dumps({"issue_key": "TASK-1", "assignee": "<@UCAROL>"}),
                marker=f"bot-a{number:08d}",
            )
            link = ToolCall(
                f"l{number}",
                "jira_link_issues",
                json.dumps(
                    {"issue_key": "TASK-1", "other_issue_key": "TASK-2", "link_type": "blocks"}
                ),
                marker=f"bot-l{number:08d}",
            )
            started = time.perf_counter()
            with turn_channel("C1", "U1"):
                for call in (assign, link):
                    forget()
                    await registry.preview(call)
                    forget()
                    result = await registry.run(call)
                    assert result.ok, result.output
            times.append((time.perf_counter() - started) * 1000)
    return (
        (len(slack.calls) - slack_before) / rounds,
        (len(jira.requests) - jira_before) / rounds,
        statistics.median(times),
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with (
        FakeSlack(bot_token="xoxb-bench", bot_user_id="UBOT") as slack,
        FakeJira(email="bot@example.com", api_token="tok") as jira,
    ):
        slack.users["UCAROL"] = {"real_name": "Carol Diaz", "email": "carol@example.com"}
        jira.add_user("Carol Diaz", "carol@example.com")
        jira.add_issue("TASK-1")
        jira.add_issue("TASK-2")
        print("caches  slack/round  jira/round  ms/round (median)")
        for _ in range(args.runs):
            for cached in (True, False):
                slack_calls, jira_calls, ms = await run(args.rounds, cached, jira, slack)
                state = "on " if cached else "off"
                print(f"{state}     {slack_calls:11.2f}  {jira_calls:10.2f}  {ms:8.1f}")


if __name__ == "__main__":
    asyncio.run(main())
