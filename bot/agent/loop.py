"""The tool loop: ask the model, run the tools it calls, repeat, up to a round cap.

No Slack, no SQL: it takes the conversation so far and returns the new messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.agent.tokens import count_message
from bot.errors import ModelError, ModelTimeout
from bot.llm.base import ChatModel, TextSink
from bot.messages import Message, ModelReply, ToolCall, Usage
from bot.tools.base import ToolRegistry, error_result

log = logging.getLogger(__name__)

#: told what the turn is doing: the calls about to run (progress signs in Slack)
ProgressSink = Callable[[Sequence[ToolCall]], Awaitable[None]]
#: told after each round whose calls ran: the turn's new messages so far (to store early)
RoundSink = Callable[[Sequence[Message]], Awaitable[None]]

EMPTY_ANSWER = "I could not come up with an answer. Please rephrase the question."
CUT_OFF_NOTE = "\n\n_(This answer was cut off: it was longer than the model may write.)_"
FILTERED_ANSWER = "I can't help with that request."
CAPPED_NOTE = (
    "(Note from the bot, not the user: you have used all {} tool rounds for this message. "
    "Answer now without tools: say what you found and did so far, and what is left to do.)"
)


@dataclass(frozen=True)
class Decision:
    """What to do with a call of a writing tool: run it, decline it (the reason is the
    call's result), or pause the turn until a person decides."""

    action: Literal["run", "decline", "pause"]
    reason: str = ""


RUN = Decision("run")
PAUSE = Decision("pause")

#: asked before each call of a tool that writes
Approver = Callable[[ToolCall], Awaitable[Decision]]


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
    #: when paused for approval: the assistant message whose calls wait, and everything
    #: the model had seen before it (to resume from)
    pending: Message | None = None
    conversation: list[Message] = field(default_factory=list)
    #: rounds done before the round cap's count started (a turn continued past the cap)
    round_base: int = 0


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
        approver: Approver | None = None,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
        on_round: RoundSink | None = None,
    ) -> TurnResult:
        """Run one turn. Never raises ModelError: a failing model is the result's error."""
        result = TurnResult(outcome="running")
        rounds = self._rounds([*history, user], result, approver, on_progress, on_text, on_round)
        return await self._bounded(rounds, result)

    async def resume(
        self,
        conversation: Sequence[Message],
        pending: Message | None,
        decisions: dict[str, Decision],
        prior: TurnResult,
        *,
        approver: Approver | None = None,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
        on_round: RoundSink | None = None,
    ) -> TurnResult:
        """Continue a stopped turn: run or decline the pending calls as decided (a turn
        paused for approval), then go on as ``run`` would. ``prior`` carries the rounds,
        tools and usage so far; a turn continued after the round cap starts with none."""
        result = TurnResult(
            outcome="running",
            rounds=prior.rounds,
            tools_called=list(prior.tools_called),
            usage=prior.usage,
            round_base=prior.round_base,
        )
        history = list(conversation)

        async def continued() -> None:
            if pending is not None:
                await self._run_calls(
                    _counted(pending), history, result, decisions, on_progress, on_round
                )
            await self._rounds(history, result, approver, on_progress, on_text, on_round)

        return await self._bounded(continued(), result)

    async def _bounded(self, work: Awaitable[None], result: TurnResult) -> TurnResult:
        try:
            async with asyncio.timeout(self.deadline_s):
                await work
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
        approver: Approver | None,
        on_progress: ProgressSink | None,
        on_text: TextSink | None,
        on_round: RoundSink | None = None,
    ) -> None:
        specs = self.registry.specs()
        while True:
            capped = result.rounds - result.round_base >= self.max_rounds
            if capped:
                # the forced answer should say what was done and what is left
                asked = [*conversation, Message.user(CAPPED_NOTE.format(result.rounds))]
                reply = await self._ask(asked, [], on_text)
            else:
                reply = await self._ask(conversation, specs, on_text)
            result.usage += reply.usage
            if not reply.tool_calls or capped:
                self._finish(reply, conversation, result, capped)
                return
            assistant = _counted(Message.assistant(reply.content, reply.tool_calls))
            decisions = await self._decide(reply.tool_calls, approver)
            if any(d.action == "pause" for d in decisions.values()):
                result.outcome, result.pending = "awaiting_approval", assistant
                result.conversation = list(conversation)
                return
            await self._run_calls(assistant, conversation, result, decisions, on_progress, on_round)

    async def _decide(
        self, calls: Sequence[ToolCall], approver: Approver | None
    ) -> dict[str, Decision]:
        decisions = {}
        for call in calls:
            writes = self.registry.writes(call.name)
            decisions[call.id] = await approver(call) if writes and approver else RUN
        return decisions

    async def _ask(self, conversation, specs, on_text) -> ModelReply:  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        reply = await self.model.complete(self.system, conversation, specs, on_text)
        log.debug("model answered in %.0f ms", (time.perf_counter() - started) * 1000)
        return reply

    async def _run_calls(
        self,
        assistant: Message,
        conversation: list[Message],
        result: TurnResult,
        decisions: dict[str, Decision],
        on_progress: ProgressSink | None,
        on_round: RoundSink | None = None,
    ) -> None:
        """Run one round's calls (in parallel; results in call order) and record them."""
        calls = assistant.tool_calls
        if on_progress is not None:
            await on_progress(calls)

        async def outcome(call: ToolCall) -> str:
            decision = decisions.get(call.id, RUN)
            if decision.action == "run":
                return await self.registry.run(call)
            return error_result(decision.reason or "Not done: the action was not approved.")

        outputs = await asyncio.gather(*(outcome(call) for call in calls))
        new = [assistant]
        new += [_counted(Message.tool_result(c, o)) for c, o in zip(calls, outputs, strict=True)]
        conversation.extend(new)
        result.messages.extend(new)
        result.rounds += 1
        result.tools_called.extend(call.name for call in calls)
        if on_round is not None:
            await on_round(result.messages)

    def _finish(
        self, reply: ModelReply, conversation: list[Message], result: TurnResult, capped: bool
    ) -> None:
        answer = reply.content or EMPTY_ANSWER
        if reply.finish == "length":
            answer += CUT_OFF_NOTE
        elif reply.finish == "content_filter":
            answer = FILTERED_ANSWER
        if capped:
            # kept so that a person can let the turn go on for more rounds
            result.conversation = list(conversation)
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
