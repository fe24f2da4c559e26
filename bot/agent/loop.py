"""The tool loop: ask the model, run the tools it calls, repeat, up to a round cap.

No Slack, no SQL: it takes the conversation so far and returns the new messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bot.agent.tokens import count_message
from bot.errors import ModelError, ModelTimeout
from bot.llm.base import ChatModel, TextSink
from bot.messages import Message, ModelReply, ToolCall, Usage
from bot.tools.base import ToolRegistry

log = logging.getLogger(__name__)

#: told what the turn is doing: the calls about to run (progress signs in Slack)
ProgressSink = Callable[[Sequence[ToolCall]], Awaitable[None]]

EMPTY_ANSWER = "I could not come up with an answer. Please rephrase the question."
CUT_OFF_NOTE = "\n\n_(This answer was cut off: it was longer than the model may write.)_"
FILTERED_ANSWER = "I can't help with that request."


@dataclass
class TurnResult:
    """What one turn produced. ``messages`` are the new assistant and tool messages, in
    order, with token estimates; on error they hold only the rounds that completed."""

    outcome: str
    answer: str | None = None
    messages: list[Message] = field(default_factory=list)
    rounds: int = 0
    tools_called: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: ModelError | None = None


@dataclass
class Loop:
    """The loop's fixed parts: model, tools, system message, round cap and deadline."""

    model: ChatModel
    registry: ToolRegistry
    system: str
    max_rounds: int = 5
    deadline_s: float = 300.0

    async def run(
        self,
        history: Sequence[Message],
        user: Message,
        *,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
    ) -> TurnResult:
        """Run one turn. Never raises ModelError: a failing model is the result's error."""
        result = TurnResult(outcome="running")
        conversation = [*history, user]
        deadline = asyncio.get_running_loop().time() + self.deadline_s
        try:
            async with asyncio.timeout_at(deadline):
                await self._rounds(conversation, result, on_progress, on_text)
        except TimeoutError:
            result.outcome, result.error = (
                "error",
                ModelTimeout("The answer took too long, so I stopped. Please try again."),
            )
        except ModelError as exc:
            result.outcome, result.error = "error", exc
        return result

    async def _rounds(
        self,
        conversation: list[Message],
        result: TurnResult,
        on_progress: ProgressSink | None,
        on_text: TextSink | None,
    ) -> None:
        specs = self.registry.specs()
        while True:
            capped = result.rounds >= self.max_rounds
            reply = await self._ask(conversation, [] if capped else specs, on_text)
            result.usage += reply.usage
            if reply.tool_calls and not capped:
                await self._run_tools(reply, conversation, result, on_progress)
                continue
            self._finish(reply, conversation, result, capped)
            return

    async def _ask(self, conversation, specs, on_text) -> ModelReply:  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        reply = await self.model.complete(self.system, conversation, specs, on_text)
        log.debug("model answered in %.0f ms", (time.perf_counter() - started) * 1000)
        return reply

    async def _run_tools(
        self,
        reply: ModelReply,
        conversation: list[Message],
        result: TurnResult,
        on_progress: ProgressSink | None,
    ) -> None:
        calls = reply.tool_calls
        if on_progress is not None:
            await on_progress(calls)
        # every call runs, in parallel; each result is stored in call order
        outputs = await asyncio.gather(*(self.registry.run(call) for call in calls))
        new = [_counted(Message.assistant(reply.content, calls))]
        new += [_counted(Message.tool_result(c, o)) for c, o in zip(calls, outputs, strict=True)]
        conversation.extend(new)
        result.messages.extend(new)
        result.rounds += 1
        result.tools_called.extend(call.name for call in calls)

    def _finish(
        self, reply: ModelReply, conversation: list[Message], result: TurnResult, capped: bool
    ) -> None:
        answer = reply.content or EMPTY_ANSWER
        if reply.finish == "length":
            answer += CUT_OFF_NOTE
        elif reply.finish == "content_filter":
            answer = FILTERED_ANSWER
        if capped:
            log.warning(
                "turn hit the round cap after %d rounds; last tool %s; answer forced",
                result.rounds,
                result.tools_called[-1] if result.tools_called else "none",
            )
        result.outcome = (
            "truncated" if reply.finish == "length" else "max_rounds" if capped else "answered"
        )
        final = _counted(Message.assistant(answer))
        conversation.append(final)
        result.messages.append(final)
        result.answer = answer


def _counted(message: Message) -> Message:
    return message.with_(tokens=count_message(message))
