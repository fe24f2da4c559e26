"""GET /metrics as Prometheus scrapes it: after real turns in Slack (answered, failed, capped,
with a tool error, with a refused post) each series says what happened; only a bearer
token gets in, and no label holds a channel or user ID."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import Fail, FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.agent_helpers import jira_settings, posted_card, script_ticket_flow
from tests.scenarios.slack.conftest import Clock, RunningBot, mention, turn_finished

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "metrics-token"
ADMIN_TOKEN = "admin-token-0123456789abcdef012345"
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def get_metrics(bot: RunningBot, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(f"{bot.url}/metrics", headers=headers)


async def scrape(bot: RunningBot) -> Series:
    response = await get_metrics(bot)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


async def turn(bot: RunningBot, slack: FakeSlack, clock: Clock, channel: str, text: str) -> None:
    ts = clock.ts()
    await bot.send(mention(channel, ts, text))
    await slack.wait_for(turn_finished(channel, ts), timeout=20)


async def test_each_series_counts_what_the_turns_did(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    bot = start_bot(METRICS_TOKEN=TOKEN, MAX_TOOL_ROUNDS=1)
    before = await scrape(bot)

    # answered, its post refused by Slack
    fake_slack.fail_next("chat.postMessage", error="not_in_channel")
    fake_openai.script(Reply(text="Hello.", usage=(100, 20)))
    await turn(bot, fake_slack, clock, "C1", "hi")
    # a tool error (a known tool, a bad time zone; a made-up tool), then the answer (forced,
    # as one round is the cap here)
    fake_openai.script(
        Reply(
            tool_calls=[
                ToolUse("get_current_time", {"timezone": "Mars/Olympus"}),
                ToolUse("launch_rockets", {}),
            ],
            usage=(50, 5),
        ),
        Reply(text="No such zone.", usage=(60, 6)),
    )
    await turn(bot, fake_slack, clock, "C2", "time on Mars?")
    # capped: one round with a tool that works, then the answer is forced
    fake_openai.script(
        Reply(tool_calls=[ToolUse("get_current_time", {})], usage=(10, 1)),
        Reply(text="Forced.", usage=(20, 2)),
    )
    await turn(bot, fake_slack, clock, "C3", "time?")
    # failed: the model server errs, and so do the client's two retries
    fake_openai.script(Fail(500), Fail(500), Fail(500))
    await turn(bot, fake_slack, clock, "C4", "anyone?")
    await bot.idle()

    after = await scrape(bot)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("bot_turns_total", outcome="answered") == 1
    assert delta("bot_turns_total", outcome="max_rounds") == 2
    assert delta("bot_turns_total", outcome="error") == 1
    assert delta("bot_turn_duration_seconds_count", outcome="answered") == 1
    assert delta("bot_turn_duration_seconds_count", outcome="max_rounds") == 2
    assert delta("bot_turn_duration_seconds_count", outcome="error") == 1
    assert delta("bot_turn_duration_seconds_sum", outcome="answered") > 0
    assert delta("bot_model_requests_total", status="ok") == 5
    assert delta("bot_model_requests_total", status="server") == 1
    assert delta("bot_model_request_duration_seconds_count") == 6
    assert delta("bot_tokens_total", kind="input") == 240
    assert delta("bot_tokens_total", kind="output") == 34
    assert delta("bot_tool_calls_total", tool="get_current_time", outcome="error") == 1
    assert delta("bot_tool_calls_total", tool="get_current_time", outcome="ok") == 1
    assert delta("bot_tool_calls_total", tool="unknown", outcome="error") == 1
    refused = {"method": "chat.postMessage", "error": "not_in_channel"}
    assert delta("bot_slack_api_errors_total", **refused) == 1
    assert value(after, "bot_turns_in_flight") == 0
    assert value(after, "process_resident_memory_bytes") > 0

    # no label holds an ID, nor the name the model made up
    text = (await get_metrics(bot)).text
    for leak in ("C1", "C2", "U1", "launch_rockets", TOKEN):
        assert leak not in text


async def test_a_turn_in_flight_is_counted_while_it_runs(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    bot = start_bot(METRICS_TOKEN=TOKEN)
    model_asked, go_on = threading.Event(), threading.Event()

    def slow(request: Request) -> Reply:
        model_asked.set()
        go_on.wait(10)
        return Reply(text="Done.")

    fake_openai.script(slow)
    ts = clock.ts()
    await bot.send(mention("C1", ts))
    await asyncio.to_thread(model_asked.wait, 10)

    assert value(await scrape(bot), "bot_turns_in_flight") == 1
    go_on.set()
    await fake_slack.wait_for(turn_finished("C1", ts), timeout=10)
    await bot.idle()
    assert value(await scrape(bot), "bot_turns_in_flight") == 0


async def test_metrics_need_the_bearer_token(start_bot: Callable[..., RunningBot]) -> None:
    bot = start_bot(METRICS_TOKEN=TOKEN, ADMIN_TOKEN=ADMIN_TOKEN)

    assert (await get_metrics(bot, TOKEN)).status_code == 200
    for refused in (None, "wrong", ADMIN_TOKEN):
        response = await get_metrics(bot, refused)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "bot_turns" not in response.text


async def test_the_admin_token_serves_when_no_metrics_token_is_set(
    start_bot: Callable[..., RunningBot],
) -> None:
    bot = start_bot(ADMIN_TOKEN=ADMIN_TOKEN)

    assert (await get_metrics(bot, ADMIN_TOKEN)).status_code == 200
    assert (await get_metrics(bot, None)).status_code == 401


async def test_without_a_token_metrics_answer_404(start_bot: Callable[..., RunningBot]) -> None:
    bot = start_bot()

    assert (await get_metrics(bot, None)).status_code == 404
    assert (await get_metrics(bot, "anything")).status_code == 404


async def test_the_example_dashboard_queries_only_series_the_bot_serves(
    start_bot: Callable[..., RunningBot],
) -> None:
    bot = start_bot(METRICS_TOKEN=TOKEN)
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", (await get_metrics(bot)).text, re.M))
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())

    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b(?:bot|process)_[a-z_]+", target["expr"])
    }
    assert queried
    for name in queried:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in declared or declared.get(base) == "histogram", name


async def test_a_write_waiting_for_approval_then_expiring_is_counted_each_time(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    fake_jira: FakeJira,
    clock: Clock,
) -> None:
    bot = start_bot(**jira_settings(fake_jira, METRICS_TOKEN=TOKEN, APPROVAL_TIMEOUT_S=0.5))
    before = await scrape(bot)
    script_ticket_flow(fake_openai)

    await bot.send(mention("C1", clock.ts(), "open a ticket for Ana"))
    await fake_slack.wait_for(lambda s: posted_card(s, "C1") is not None, timeout=10)
    card = posted_card(fake_slack, "C1")
    assert card is not None

    def expired(slack: FakeSlack) -> bool:
        message = next(m for m in slack.messages("C1") if m["ts"] == card["ts"])
        return "expired" in json.dumps(message["blocks"])

    await fake_slack.wait_for(expired, timeout=5)
    after = await scrape(bot)
    for outcome in ("awaiting_approval", "expired"):
        counted = value(after, "bot_turns_total", outcome=outcome)
        assert counted - value(before, "bot_turns_total", outcome=outcome) == 1, outcome
