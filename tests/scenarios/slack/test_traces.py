"""Traces as a collector receives them (OpenTelemetry's in-memory exporter): one Slack event
is a tree, event -> turn -> each model request and each tool call, with the GenAI semantic
conventions' attributes, and no message text unless OTEL_CAPTURE_CONTENT is on."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from bot.agent.conversations import Incoming
from tests.fakes.openai_server import Fail, FakeOpenAI, Reply, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, RunningBot, mention, turn_finished

SECRET_WORDS = "the launch code is 0000"


def named(spans: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name.startswith(prefix)]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def tool_round(call_id: str = "call_1") -> Reply:
    return Reply(
        tool_calls=[ToolUse("get_current_time", {"timezone": "Europe/Paris"}, call_id)],
        usage=(30, 4),
    )


async def test_a_slack_event_is_one_tree_down_to_the_tool_call(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
    spans: InMemorySpanExporter,
) -> None:
    bot = start_bot(OPENAI_MODEL="gpt-test")
    fake_openai.script(tool_round(), Reply(text="It is noon.", usage=(40, 5)))
    ts = clock.ts()

    await bot.send(mention("C1", ts, SECRET_WORDS), event_id="Ev123")
    await fake_slack.wait_for(turn_finished("C1", ts), timeout=10)
    await bot.idle()

    (event,) = named(spans, "slack app_mention")
    (turn,) = named(spans, "invoke_agent bot")
    first, second = sorted(named(spans, "chat gpt-test"), key=lambda s: s.start_time or 0)
    (tool,) = named(spans, "execute_tool get_current_time")
    assert event.parent is None and event.kind == SpanKind.SERVER
    assert event.attributes is not None
    assert event.attributes["slack.event_id"] == "Ev123"
    assert event.attributes["slack.event.type"] == "app_mention"
    assert len({s.context.trace_id for s in (event, turn, first, second, tool)}) == 1
    assert parent_of(turn) == event.context.span_id
    assert parent_of(first) == parent_of(second) == parent_of(tool) == turn.context.span_id

    assert turn.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "bot",
        "gen_ai.conversation.id": "C1",
        "bot.turn.id": turn.attributes["bot.turn.id"],
        "bot.turn.outcome": "answered",
        "bot.turn.rounds": 1,
        "gen_ai.usage.input_tokens": 70,
        "gen_ai.usage.output_tokens": 9,
    }
    assert first.kind == SpanKind.CLIENT
    assert first.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "bot.llm.api": "chat",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert tool.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_current_time",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
    }
    # no message text, arguments or results by default
    for span in spans.get_finished_spans():
        for value in (span.attributes or {}).values():
            assert "launch code" not in str(value) and "Europe/Paris" not in str(value)


async def test_content_is_on_the_spans_only_when_asked_for(
    make_services, fake_openai: FakeOpenAI, spans: InMemorySpanExporter
) -> None:
    services = make_services(OTEL_CAPTURE_CONTENT="on")
    fake_openai.script(tool_round(), Reply(text="It is noon."))

    async with services.jobs.hold("C1"):
        await services.conversations.ask(Incoming("C1", SECRET_WORDS, "U1"))

    first, second = sorted(named(spans, "chat "), key=lambda s: s.start_time or 0)
    (tool,) = named(spans, "execute_tool")
    assert first.attributes is not None and second.attributes is not None
    assert SECRET_WORDS in str(first.attributes["gen_ai.input.messages"])
    assert "gen_ai.system_instructions" in first.attributes
    assert "It is noon." in str(second.attributes["gen_ai.output.messages"])
    assert tool.attributes is not None
    assert "Europe/Paris" in str(tool.attributes["gen_ai.tool.call.arguments"])
    assert "datetime" in str(tool.attributes["gen_ai.tool.call.result"])


async def test_failures_are_error_spans_with_their_kind(
    make_services, fake_openai: FakeOpenAI, spans: InMemorySpanExporter
) -> None:
    services = make_services()
    fake_openai.script(
        Reply(tool_calls=[ToolUse("get_current_time", {"timezone": "Mars/Olympus"})]),
        Fail(400, "bad request"),
    )

    async with services.jobs.hold("C1"):
        reply = await services.conversations.ask(Incoming("C1", "time on Mars?", "U1"))

    assert not reply.ok
    (turn,) = named(spans, "invoke_agent")
    (tool,) = named(spans, "execute_tool")
    failed = [s for s in named(spans, "chat ") if s.status.status_code == StatusCode.ERROR]
    assert turn.status.status_code == StatusCode.ERROR
    assert turn.attributes is not None and turn.attributes["bot.turn.outcome"] == "error"
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.attributes is not None and tool.attributes["error.type"] == "tool_error"
    (request,) = failed
    assert request.attributes is not None and request.attributes["error.type"] == "bad_request"
    assert not request.events  # no exception text: it could hold what the server sent
