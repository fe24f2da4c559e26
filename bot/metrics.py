"""The bot's Prometheus series, one registry a process (``GET /metrics`` renders it).

Every process keeps its own counts: with several processes (replicas, or HTTP and Socket
Mode side by side) Prometheus scrapes each one, and ``sum`` across the ``instance`` label
gives the whole. No label holds a channel or user ID, nor anything the model made up: a
tool name the registry does not know is counted as ``unknown``.
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

REGISTRY = CollectorRegistry(auto_describe=True)
# the process's memory, CPU and open files, as the client's default registry has them
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

#: a turn takes seconds (tool rounds, a slow model); a model request up to MODEL_TIMEOUT_S
TURN_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
REQUEST_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)

TURNS = Counter(
    "bot_turns",
    "Turns that ended (or stopped for a person), by outcome.",
    ["outcome"],
    registry=REGISTRY,
)
TURN_DURATION = Histogram(
    "bot_turn_duration_seconds",
    "Time from a turn's start (or its going on after a stop) to its stored end, by outcome.",
    ["outcome"],
    buckets=TURN_BUCKETS,
    registry=REGISTRY,
)
TURNS_IN_FLIGHT = Gauge(
    "bot_turns_in_flight", "Turns being worked on in this process now.", registry=REGISTRY
)
MODEL_REQUESTS = Counter(
    "bot_model_requests",
    "Requests to the model server, by status: ok, or what went wrong (rate_limited, "
    "server, timeout, connection, ...).",
    ["status"],
    registry=REGISTRY,
)
MODEL_REQUEST_DURATION = Histogram(
    "bot_model_request_duration_seconds",
    "Time of one request to the model server, the streamed answer included.",
    buckets=REQUEST_BUCKETS,
    registry=REGISTRY,
)
TOKENS = Counter(
    "bot_tokens",
    "Tokens the model server reported, kind input or output; kind summary: the tokens of "
    "the summaries made of what fell out of a channel's window.",
    ["kind"],
    registry=REGISTRY,
)
SUMMARIES = Counter(
    "bot_summaries",
    "Summary requests of what fell out of a channel's window, by outcome: made, empty (the "
    "model wrote nothing), failed (an error or a timeout).",
    ["outcome"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "bot_tool_calls",
    "Tool calls run, by tool and outcome (ok or error: the call's result is an error).",
    ["tool", "outcome"],
    registry=REGISTRY,
)
SLACK_API_ERRORS = Counter(
    "bot_slack_api_errors",
    "Slack Web API calls that failed, by method and error (Slack's error code, or the "
    "connection error's name).",
    ["method", "error"],
    registry=REGISTRY,
)

# the everyday series exist from the start: a dashboard shows 0 rather than no data
for _outcome in ("answered", "max_rounds", "truncated", "error"):
    TURNS.labels(_outcome)
    TURN_DURATION.labels(_outcome)
for _kind in ("input", "output", "summary"):
    TOKENS.labels(_kind)
for _outcome in ("made", "empty", "failed"):
    SUMMARIES.labels(_outcome)
MODEL_REQUESTS.labels("ok")


def render() -> tuple[bytes, str]:
    """The Prometheus text exposition of every series, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
