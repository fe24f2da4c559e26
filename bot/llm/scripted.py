"""ScriptedModel: an in-process ChatModel that replays queued replies and records what it
was asked, for unit tests of the loop and of conversations (and benchmarks that measure
the bot, not a model). It holds a request to the rules a real API does: a tool result
must answer a call of the message just before it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.errors import ModelError
from bot.llm.base import TextSink
from bot.messages import Message, ModelReply, ToolSpec

#: what a script may hold: a reply, text (an answer), an error to raise, or a function of
#: the request that gives one
Scripted = ModelReply | str | ModelError | Callable[["Request"], "ModelReply | str"]


@dataclass(frozen=True)
class Request:
    """One request the model was sent."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    streamed: bool


@dataclass
class ScriptedModel:
    """Answers each request with the next entry of ``script``; ``requests`` records them."""

    script: list[Scripted] = field(default_factory=list)
    model: str = "scripted"
    api: str = "chat"
    requests: list[Request] = field(default_factory=list)

    def then(self, *replies: Scripted) -> ScriptedModel:
        """Queue more replies."""
        self.script += replies
        return self

    async def complete(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None = None,
    ) -> ModelReply:
        _check_pairs(messages)
        request = Request(system, tuple(messages), tuple(tools), on_text is not None)
        self.requests.append(request)
        if not self.script:
            raise AssertionError(f"the script has no reply left for request {len(self.requests)}")
        entry = self.script.pop(0)
        if isinstance(entry, ModelError):
            raise entry
        reply = entry(request) if callable(entry) else entry
        if isinstance(reply, str):
            reply = ModelReply(reply)
        if on_text is not None and reply.content:
            await on_text(reply.content)
        return reply


def _check_pairs(messages: Sequence[Message]) -> None:
    """A tool result whose call is not in the assistant message before it is refused, as
    the real APIs refuse it."""
    calls: set[str] = set()
    for message in messages:
        if message.role == "assistant":
            calls = {call.id for call in message.tool_calls}
        elif message.role == "tool" and message.tool_call_id not in calls:
            raise AssertionError(f"tool result {message.tool_call_id} answers no call")
        elif message.role == "user":
            calls = set()
