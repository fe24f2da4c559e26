"""``bot run`` as a real process, observed as an operator would: every JSON log line of a
turn carries its channel, turn id and event id (two turns at once keep theirs apart), and
with OTEL_EXPORTER_OTLP_ENDPOINT its spans reach an OTLP/HTTP collector."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.serve import serve_in_thread
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, mention, turn_finished
from tests.scenarios.slack.test_processes import BotProcess, process_settings


def look_up_the_time(request: Request) -> Reply:
    """A tool round first, then the answer."""
    last = (request.body.get("messages") or [{}])[-1]
    if last.get("role") == "tool":
        return Reply(text="It is noon.")
    return Reply(tool_calls=[ToolUse("get_current_time", {"timezone": "UTC"})])


async def test_every_log_line_of_a_turn_carries_its_ids(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.responder = look_up_the_time
    settings = process_settings(sqlite_url, fake_slack, fake_openai)
    bot = BotProcess(tmp_path, **settings, LOG_FORMAT="json", LOG_LEVEL="DEBUG")
    try:
        await bot.healthy()
        first, second = clock.ts(), clock.ts()
        sent = await asyncio.gather(
            bot.send(mention("C1", first, "time?"), event_id="Ev1"),
            bot.send(mention("C2", second, "time?"), event_id="Ev2"),
        )
        assert sent == [200, 200]
        await fake_slack.wait_for(turn_finished("C1", first), timeout=30)
        await fake_slack.wait_for(turn_finished("C2", second), timeout=30)
    finally:
        status, stderr = await asyncio.to_thread(bot.finish)

    assert status == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]
    ended = [line for line in lines if str(line["message"]).startswith("turn ")]
    turn_ids = {line["channel"]: line["turn_id"] for line in ended}
    assert set(turn_ids) == {"C1", "C2"} and turn_ids["C1"] != turn_ids["C2"]
    event_ids = {"C1": "Ev1", "C2": "Ev2"}
    # the lines of the tools, the loop and the store, logged inside the turn
    inside = [line for line in lines if "turn_id" in line]
    loggers = {str(line["logger"]) for line in inside}
    assert {"bot.tools.base", "bot.agent.loop", "bot.telemetry"} <= loggers
    for line in inside:
        channel = line["channel"]
        assert line["turn_id"] == turn_ids[channel], line
        assert line["event_id"] == event_ids[channel], line
    tool_lines = [line for line in inside if "tool get_current_time ok" in str(line["message"])]
    assert {line["channel"] for line in tool_lines} == {"C1", "C2"}


class Collector:
    """An OTLP/HTTP trace receiver: ``POST /v1/traces`` with protobuf, as a collector takes it."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str]] = []  # (service.name, span name)
        self.arrived = threading.Event()

        async def traces(request: HttpRequest) -> Response:
            assert request.headers["content-type"] == "application/x-protobuf"
            export = ExportTraceServiceRequest.FromString(await request.body())
            for resource_spans in export.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append((resource["service.name"], span.name))
            self.arrived.set()
            return Response(b"", media_type="application/x-protobuf")

        self.served = serve_in_thread(
            Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
        )


async def test_spans_reach_the_otlp_collector(
    tmp_path: Path, sqlite_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.responder = look_up_the_time
    collector = Collector()
    settings = process_settings(sqlite_url, fake_slack, fake_openai)
    bot = BotProcess(
        tmp_path,
        **settings,
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.served.url,
        OTEL_SERVICE_NAME="bot-under-test",
    )
    try:
        await bot.healthy()
        ts = clock.ts()
        assert await bot.send(mention("C1", ts, "time?")) == 200
        await fake_slack.wait_for(turn_finished("C1", ts), timeout=30)
    finally:
        status, stderr = await asyncio.to_thread(bot.finish)
        collector.served.stop()

    assert status == 0, stderr
    assert collector.arrived.is_set(), "no spans were exported by the time the bot exited"
    names = {name for service, name in collector.spans if service == "bot-under-test"}
    assert {
        "slack app_mention",
        "invoke_agent bot",
        "chat gpt-5-mini",
        "execute_tool get_current_time",
    } <= names
