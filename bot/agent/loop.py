"""The tool loop: ask the model, run the tools it calls, repeat, up to a round cap.

No Slack, no SQL: it takes the conversation so far and returns the new messages. Before a
round's tool calls run, the turn's new messages so far are handed to the journal (the
assistant message that asks for them included, each writing call with its idempotency
marker), and so are the results of a round that wrote, as soon as they are in: a turn
resumed after a crash never asks the model again for a stored round and never sends a
write twice (``resume`` with ``recovering``), and one nobody resumes still tells the next
turn what it changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bot import telemetry
from bot.agent.limits import ModelSlots
from bot.agent.tokens import count_message
from bot.agent.window import select_window
from bot.errors import ModelError, ModelTimeout
from bot.llm.base import ChatModel, TextSink
from bot.messages import Decision, Message, ModelReply, Outcome, ToolCall, ToolSpec, Usage
from bot.tools.base import ToolRegistry, error_result, is_error_result

log = logging.getLogger(__name__)

#: told what the turn is doing: the calls about to run (progress signs in Slack)
ProgressSink = Callable[[Sequence[ToolCall]], Awaitable[None]]
#: told each call's end as it comes: the call, and whether it failed (an error result)
DoneSink = Callable[[ToolCall, bool], Awaitable[None]]
#: stores the turn's new messages, before the tool calls they end with run
JournalSink = Callable[[Sequence[Message]], Awaitable[None]]

EMPTY_ANSWER = "I could not come up with an answer. Please rephrase the question."
CUT_OFF_NOTE = "\n\n_(This answer was cut off: it was longer than the model may write.)_"
FILTERED_ANSWER = "I can't help with that request."
CAPPED_NOTE = (
    "You have used all {} tool rounds for this message. Answer now without tools: say what "
    "you found and did so far, and what is left to do."
)
NOT_APPROVED = "Not done: the action was not approved."

RUN = Decision("run")
PAUSE = Decision("pause")

#: asked before each call of a tool that writes
Approver = Callable[[ToolCall], Awaitable[Decision]]


@dataclass
class TurnResult:
    """What one stretch of a turn produced. ``messages`` are the new assistant and tool
    messages, in order, with token estimates; the first ``journaled`` of them are stored
    already. On error they hold only the rounds that completed."""

    outcome: Outcome
    answer: str | None = None
    messages: list[Message] = field(default_factory=list)
    journaled: int = 0
    rounds: int = 0
    tools_called: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: ModelError | None = None
    #: when paused for approval: the assistant message whose calls wait
    pending: Message | None = None
    #: rounds done before the round cap's count started (a turn continued past the cap)
    round_base: int = 0


@dataclass(frozen=True)
class Hooks:
    """What the caller is told while a turn runs (each optional)."""

    approver: Approver | None = None
    on_progress: ProgressSink | None = None
    on_text: TextSink | None = None
    journal: JournalSink | None = None
    on_done: DoneSink | None = None


@dataclass
class Conversation:
    """What a stretch of a turn sends the model: the older ``history`` (what a trim may
    drop, oldest first) and the turn's own messages (its question and its rounds: never
    dropped)."""

    history: list[Message]
    turn: list[Message]
    #: the history was trimmed once already after the model found it too long
    trimmed: bool = False

    @property
    def messages(self) -> list[Message]:
        return [*self.history, *self.turn]

    def trim(self) -> bool:
        """Drop the oldest whole turns of the history, leaving about a quarter of its
        tokens; False when there is nothing to drop or it was trimmed before."""
        if self.trimmed or not self.history:
            return False
        self.trimmed = True
        self.history = select_window(self.history, sum(m.tokens for m in self.history) // 4)
        return True


@dataclass
class Loop:
    """The loop's fixed parts: model, tools, system message, round cap and deadline."""

    model: ChatModel
    registry: ToolRegistry
    system: str
    max_rounds: int = 5
    deadline_s: float = 300.0
    #: model requests in flight at once (None: no limit)
    slots: ModelSlots | None = None

    async def run(self, history: Sequence[Message], user: Message, hooks: Hooks) -> TurnResult:
        """Run one turn. Never raises ModelError: a failing model is the result's error (a
        new turn refused for want of a model slot too)."""
        result = TurnResult(outcome=Outcome.RUNNING)
        conversation = Conversation(list(history), [user])

        async def turn() -> None:
            if self.slots is not None:
                await self.slots.admit()
            await self._rounds(conversation, result, hooks)

        return await self._bounded(turn(), result)

    async def resume(
        self,
        history: Sequence[Message],
        journal: Sequence[Message],
        unfinished: Message | None,
        decisions: dict[str, Decision],
        prior: TurnResult,
        hooks: Hooks,
        *,
        recovering: bool = False,
    ) -> TurnResult:
        """Go on with a turn from its ``journal`` (everything stored of it, after the older
        ``history``): first the calls of ``unfinished`` (an assistant message whose calls
        have no results yet), as ``decisions`` say, then as ``run`` would. ``recovering``:
        the calls may have been sent before a crash, so a write is looked up by its marker,
        never sent again. ``prior`` carries the rounds, tools and usage so far."""
        result = dataclasses.replace(prior, outcome=Outcome.RUNNING, messages=[], journaled=0)
        conversation = Conversation(list(history), list(journal))

        async def go_on() -> None:
            if unfinished is not None:
                await self._run_calls(
                    unfinished, conversation, result, decisions, hooks, recovering
                )
            await self._rounds(conversation, result, hooks)

        return await self._bounded(go_on(), result)

    async def _bounded(self, work: Awaitable[None], result: TurnResult) -> TurnResult:
        try:
            async with asyncio.timeout(self.deadline_s):
                await work
        except TimeoutError:
            result.outcome, result.error = (
                Outcome.ERROR,
                ModelTimeout("The answer took too long, so I stopped. Please try again."),
            )
        except ModelError as exc:
            result.outcome, result.error = Outcome.ERROR, exc
        return result

    async def _rounds(self, conversation: Conversation, result: TurnResult, hooks: Hooks) -> None:
        specs = self.registry.specs()
        while True:
            capped = result.rounds - result.round_base >= self.max_rounds
            reply = await self._ask(
                conversation, [] if capped else specs, hooks.on_text, capped, result
            )
            result.usage += reply.usage
            if not reply.tool_calls or capped:
                self._finish(reply, conversation, result, capped)
                return
            calls = tuple(self._marked(call) for call in reply.tool_calls)
            assistant = _counted(Message.assistant(reply.content, calls, reply.replay))
            decisions = await self._decide(calls, hooks.approver)
            if any(d.action == "pause" for d in decisions.values()):
                result.outcome, result.pending = Outcome.AWAITING_APPROVAL, assistant
                return
            await self._run_calls(assistant, conversation, result, decisions, hooks)

    def _marked(self, call: ToolCall) -> ToolCall:
        """A writing call gets its idempotency marker before anything is stored."""
        if call.marker is None and self.registry.writes(call.name):
            return dataclasses.replace(call, marker=f"bot-{secrets.token_hex(5)}")
        return call

    async def _decide(
        self, calls: Sequence[ToolCall], approver: Approver | None
    ) -> dict[str, Decision]:
        decisions = {}
        for call in calls:
            writes = self.registry.writes(call.name)
            decisions[call.id] = await approver(call) if writes and approver else RUN
        return decisions

    async def _complete(
        self,
        system: str,
        messages: list[Message],
        specs: Sequence[ToolSpec],
        on_text: TextSink | None,
    ) -> ModelReply:
        """One model request, traced and counted."""
        with telemetry.model_request(self.model.model, self.model.api, system, messages) as request:
            reply = await self.model.complete(system, messages, specs, on_text)
            request.replied(reply)
        return reply

    async def _ask(
        self,
        conversation: Conversation,
        specs: Sequence[ToolSpec],
        on_text: TextSink | None,
        capped: bool,
        result: TurnResult,
    ) -> ModelReply:
        # at the cap, the forced answer should say what was done and what is left: the
        # bot's instruction goes with the system message, never as the person's words
        system = self.system
        if capped:
            system = f"{system}\n\n{CAPPED_NOTE.format(result.rounds)}"
        started = time.perf_counter()
        async with self.slots.request() if self.slots else contextlib.nullcontext():
            try:
                reply = await self._complete(system, conversation.messages, specs, on_text)
            except ModelError as exc:
                # the estimate let in more than this model takes: once, with less history
                before = len(conversation.history)
                if exc.kind != "context_length" or not conversation.trim():
                    raise
                log.warning(
                    "context length exceeded in round %d; retrying with %d of %d history messages",
                    result.rounds + 1,
                    len(conversation.history),
                    before,
                )
                reply = await self._complete(system, conversation.messages, specs, on_text)
        log.debug("model answered in %.0f ms", (time.perf_counter() - started) * 1000)
        return reply

    async def _run_calls(
        self,
        assistant: Message,
        conversation: Conversation,
        result: TurnResult,
        decisions: dict[str, Decision],
        hooks: Hooks,
        recovering: bool = False,
    ) -> None:
        """Run one round's calls (in parallel; results in call order) and record them. The
        journal gets the round before its calls run (unless resumed from it)."""
        if not recovering:
            await self._journal(result, [assistant], hooks.journal)
        calls = assistant.tool_calls
        if hooks.on_progress is not None:
            await hooks.on_progress(calls)

        async def outcome(call: ToolCall) -> str:
            decision = decisions.get(call.id, RUN)
            if decision.action != "run":
                return error_result(decision.reason or NOT_APPROVED)
            if recovering and self.registry.writes(call.name):
                return await self.registry.recover(call)
            return await self.registry.run(call)

        async def told(call: ToolCall) -> str:
            output = await outcome(call)
            if hooks.on_done is not None:
                await hooks.on_done(call, is_error_result(output))
            return output

        outputs = await asyncio.gather(*(told(call) for call in calls))
        results = [_counted(Message.tool_result(c, o)) for c, o in zip(calls, outputs, strict=True)]
        conversation.turn += [assistant, *results]
        result.rounds += 1
        result.tools_called += [call.name for call in calls]
        if any(self.registry.writes(call.name) for call in calls):
            await self._journal(result, results, hooks.journal)  # what it changed, at once
        else:
            result.messages += results

    @staticmethod
    async def _journal(result: TurnResult, new: list[Message], journal: JournalSink | None) -> None:
        result.messages += new
        if journal is not None:
            await journal(result.messages[result.journaled :])
            result.journaled = len(result.messages)

    def _finish(
        self, reply: ModelReply, conversation: Conversation, result: TurnResult, capped: bool
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
            Outcome.TRUNCATED
            if reply.finish == "length"
            else Outcome.MAX_ROUNDS
            if capped
            else Outcome.ANSWERED
        )
        final = _counted(Message.assistant(answer))
        conversation.turn.append(final)
        result.messages.append(final)
        result.answer = answer


def _counted(message: Message) -> Message:
    return message.with_(tokens=count_message(message))
