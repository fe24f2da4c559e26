"""What a test scripts the fake OpenAI server to answer (Reply, Fail, Hang, Raw, ToolUse, or
a callable), and the requests it records."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"


@dataclass(frozen=True)
class ToolUse:
    """One tool call the fake model makes. `arguments` given as a str are sent verbatim."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    call_id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


_FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")


@dataclass
class Reply:
    """What the fake model answers. finish_reason defaults to "tool_calls" / "stop"."""

    text: str | None = None
    tool_calls: list[ToolUse] = field(default_factory=list)
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None  # (prompt/input tokens, completion/output tokens)
    #: what a reasoning model thought first: on the Responses API its output starts with a
    #: reasoning item (see tests/fakes/openai_reasoning.py); the text itself is never sent
    reasoning: str | None = None

    def __post_init__(self) -> None:
        self.tool_calls = list(self.tool_calls)
        for call in self.tool_calls:
            if not isinstance(call, ToolUse):
                raise TypeError(f"Reply.tool_calls takes ToolUse items, not {call!r}")
        if self.finish_reason is not None and self.finish_reason not in _FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {_FINISH_REASONS}")

    @property
    def effective_finish_reason(self) -> str:
        if self.finish_reason:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


@dataclass
class Fail:
    """Answer with an HTTP error and an OpenAI-shaped error body."""

    status: int
    message: str | None = None
    code: str | None = None
    type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    param: str | None = None


@dataclass(frozen=True)
class Hang:
    """Wait `seconds`, then answer 500 (for client timeouts)."""

    seconds: float


@dataclass(frozen=True)
class Raw:
    """Answer 200 with exactly this, however wrong: ``body`` as JSON (any value: a completion
    without ``choices``, a list, ...) or, for a streamed request, ``events``: each one ``data:``
    line of the event stream (a str verbatim, anything else as JSON), then ``[DONE]`` for chat."""

    body: Any = None
    events: tuple[Any, ...] = ()


Step = Reply | Fail | Hang | Raw | ToolUse | str | Callable[..., Any]

# --------------------------------------------------------------------------------------------
# Recorded requests


@dataclass
class Request:
    """A request the fake received (accepted or not)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    status: int | None = None  # what the fake answered
    error: str | None = None  # the error message it answered with, if any
    method: str = "POST"
    #: when it arrived (time.monotonic)
    at: float = field(default_factory=time.monotonic)

    @property
    def api(self) -> Literal["chat", "responses", "other"]:
        if self.path == CHAT_PATH:
            return "chat"
        if self.path == RESPONSES_PATH:
            return "responses"
        return "other"

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            if isinstance(tool, dict):
                fn = tool.get("function") if self.api == "chat" else tool
                if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                    names.append(fn["name"])
        return names


def check_step(step: Any) -> None:
    if isinstance(step, Reply | Fail | Hang | Raw | ToolUse | str) or callable(step):
        return
    raise TypeError(
        f"not a step: {step!r} (expected Reply, Fail, Hang, Raw, ToolUse, str or callable)"
    )
