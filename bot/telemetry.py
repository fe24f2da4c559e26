"""A turn, observed: its span, those of its model requests and tool calls (OpenTelemetry,
with the GenAI semantic conventions' names), the Prometheus series (bot.metrics), and the
turn's ids on every log line (bot.logs).

    slack event app_mention            (the Slack shell; the job runs in its context)
     `-- invoke_agent bot              turn(): gen_ai.conversation.id, bot.turn.id, outcome
          |-- chat gpt-5-mini          model_request(): gen_ai.request.model, gen_ai.usage.*
          `-- execute_tool jira_get_issue   tool_call(): gen_ai.tool.name, gen_ai.tool.call.id

Spans are exported only when OTEL_EXPORTER_OTLP_ENDPOINT is set (``configure_tracing``);
without it the API's tracer makes no spans at all. Message text, tool arguments and results
go on spans only with OTEL_CAPTURE_CONTENT=on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from bot import metrics
from bot.config import TelemetrySettings
from bot.errors import ModelError
from bot.logs import add_log_ids, current_log_id, log_context
from bot.messages import Message, ModelReply, Outcome
from bot.turn import TurnState

log = logging.getLogger(__name__)

_TRACER = trace.get_tracer("bot")
#: the agent's name on its spans (gen_ai.agent.name)
AGENT = "bot"
#: outcomes that mean the turn failed (its span's status is an error)
FAILED = frozenset({Outcome.ERROR, Outcome.INTERRUPTED})


class _Content:
    """Whether spans carry message text (OTEL_CAPTURE_CONTENT)."""

    captured = False


def capture_content(on: bool) -> None:
    """Set by build_services from OTEL_CAPTURE_CONTENT."""
    _Content.captured = on


def configure_tracing(settings: TelemetrySettings) -> None:
    """Export spans over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (its ``/v1/traces``), in
    batches; the exporter reads the other ``OTEL_EXPORTER_OTLP_*`` variables (headers, time
    limit) from the environment itself. Unset: nothing is traced, and the SDK is not loaded."""
    endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT
    if not endpoint:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create(
        {"service.name": settings.OTEL_SERVICE_NAME, "service.version": version("bot")}
    )
    provider = TracerProvider(resource=resource)  # flushed and shut down at exit
    exporter = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("tracing to %s", endpoint)


# -- what comes in -----------------------------------------------------------------------


@contextlib.contextmanager
def received(name: str, attributes: dict[str, Any]) -> Iterator[None]:
    """An event from outside (a Slack event, a button press): its span, current for the work
    it starts (a job's task started within is a child, though it runs on after)."""
    with _TRACER.start_as_current_span(name, kind=SpanKind.SERVER, attributes=attributes):
        yield


# -- a turn ------------------------------------------------------------------------------


@contextlib.contextmanager
def turn(channel: str | None, turn_id: int | None = None) -> Iterator[None]:
    """A turn, or the stretch of one that goes on after a stop: counted in flight, its span
    current, and ``channel`` (and, once known, the turn's id) on every log line within."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT,
    }
    if channel is not None:
        attributes["gen_ai.conversation.id"] = channel
    if channel is not None and turn_id is not None:
        attributes["bot.turn.id"] = turn_id
    # a channel the caller's log_context named already (the Slack job's) stays on the lines
    with (
        log_context(channel=channel or current_log_id("channel"), turn_id=turn_id),
        metrics.TURNS_IN_FLIGHT.track_inprogress(),
        _TRACER.start_as_current_span(f"invoke_agent {AGENT}", attributes=attributes),
    ):
        yield


def turn_began(turn_id: int | None, channel: str | None = None) -> None:
    """The turn's id (and channel) known: on its span and on the log lines from here on."""
    span = trace.get_current_span()
    if channel is not None:
        add_log_ids(channel=channel)
        span.set_attribute("gen_ai.conversation.id", channel)
    if turn_id is not None:
        add_log_ids(turn_id=turn_id)
        span.set_attribute("bot.turn.id", turn_id)


def turn_ended(record: TurnState, seconds: float) -> None:
    """The turn (its stretch of ``seconds``) ended as ``record`` says: logged, counted, and
    written on its span."""
    log.info(
        "turn %s in %s: %s, %d rounds, %d+%d tokens, %d ms",
        record.id,
        record.channel_id,
        record.outcome,
        record.rounds,
        record.input_tokens,
        record.output_tokens,
        record.latency_ms or 0,
    )
    outcome = str(record.outcome)
    metrics.TURNS.labels(outcome).inc()
    metrics.TURN_DURATION.labels(outcome).observe(seconds)
    span = trace.get_current_span()
    span.set_attributes(
        {
            "bot.turn.outcome": outcome,
            "bot.turn.rounds": record.rounds,
            "gen_ai.usage.input_tokens": record.input_tokens,
            "gen_ai.usage.output_tokens": record.output_tokens,
        }
    )
    if record.outcome in FAILED:
        span.set_status(Status(StatusCode.ERROR, record.error or outcome))


def turns_expired(count: int) -> None:
    """``count`` approval requests expired unanswered: their turns ended so."""
    if count:
        metrics.TURNS.labels(str(Outcome.EXPIRED)).inc(count)


def summary_requested(outcome: str, tokens: int = 0) -> None:
    """A summary request of what fell out of a window ended (made, empty or failed)."""
    metrics.SUMMARIES.labels(outcome).inc()
    metrics.TOKENS.labels("summary").inc(tokens)


def turn_failed(kind: str) -> None:
    """A turn that could not even be stored (the database failed): counted as an error."""
    metrics.TURNS.labels(str(Outcome.ERROR)).inc()
    span = trace.get_current_span()
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


# -- a model request ---------------------------------------------------------------------


class ModelRequest:
    """The span of one request; ``replied`` records the reply."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def replied(self, reply: ModelReply) -> None:
        usage = reply.usage
        metrics.TOKENS.labels("input").inc(usage.input_tokens)
        metrics.TOKENS.labels("output").inc(usage.output_tokens)
        self.span.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "gen_ai.response.finish_reasons": [reply.finish],
            }
        )
        if _Content.captured:
            self.span.set_attribute(
                "gen_ai.output.messages",
                _json([Message.assistant(reply.content, reply.tool_calls)]),
            )


@contextlib.contextmanager
def model_request(
    model: str, api: str, system: str, conversation: Sequence[Message]
) -> Iterator[ModelRequest]:
    """One request to the model server: counted by status, timed, and its span."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "bot.llm.api": api,
    }
    if _Content.captured:
        attributes["gen_ai.system_instructions"] = system
        attributes["gen_ai.input.messages"] = _json(conversation)
    started = time.perf_counter()
    status = "error"
    with _TRACER.start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,  # its text could hold what the server sent back
        set_status_on_exception=False,
    ) as span:
        try:
            yield ModelRequest(span)
            status = "ok"
        except ModelError as exc:
            status = exc.kind
            raise
        except (asyncio.CancelledError, TimeoutError):
            status = "cancelled"  # the turn's deadline, or shutdown
            raise
        finally:
            metrics.MODEL_REQUESTS.labels(status).inc()
            metrics.MODEL_REQUEST_DURATION.observe(time.perf_counter() - started)
            if status != "ok":
                span.set_attribute("error.type", status)
                span.set_status(Status(StatusCode.ERROR, status))


# -- a tool call -------------------------------------------------------------------------


class ToolCallSpan:
    """The span of one tool call; ``done`` records its result."""

    def __init__(self, span: Span, tool: str) -> None:
        self.span = span
        self.tool = tool

    def done(self, result: str, *, ok: bool) -> None:
        metrics.TOOL_CALLS.labels(self.tool, "ok" if ok else "error").inc()
        if _Content.captured:
            self.span.set_attribute("gen_ai.tool.call.result", result)
        if not ok:
            self.span.set_attribute("error.type", "tool_error")
            self.span.set_status(Status(StatusCode.ERROR, "tool_error"))


@contextlib.contextmanager
def tool_call(name: str, call_id: str, arguments: str, *, known: bool) -> Iterator[ToolCallSpan]:
    """One tool call's span; counted under its name when the registry ``known``s it, else
    under ``unknown`` (a name the model made up is no label)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if _Content.captured:
        attributes["gen_ai.tool.call.arguments"] = arguments
    with _TRACER.start_as_current_span(
        f"execute_tool {name}", attributes=attributes, record_exception=False
    ) as span:
        yield ToolCallSpan(span, name if known else "unknown")


def _json(messages: Sequence[Message]) -> str:
    return json.dumps([m.to_dict() for m in messages], ensure_ascii=False, default=str)
