"""The tool loop: ask the model, run the tools it calls, repeat, up to a round cap.

No Slack, no SQL: ``Loop.run`` takes a TurnState (bot.turn) and runs it on from where it
stands, telling one TurnObserver what happens. Before a round's tool calls run, the turn's
new messages so far are handed to the journal (the assistant message that asks for them
included, each writing call with its idempotency marker), and so are the results of a
round that wrote, as soon as they are in: a turn that goes on after a crash never asks
the model again for a stored round and never sends a write twice (a state that is
``recovering``), and one nobody goes on with still tells the next turn what it changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot import telemetry
from bot.agent.approval import APPROVAL, decide
from bot.agent.limits import ModelSlots
from bot.agent.memory import fewer_turns, repair
from bot.agent.observer import UNOBSERVED, TurnObserver
from bot.agent.tokens import count_message
from bot.errors import ModelError, ModelTimeout
from bot.llm.base import ChatModel, TextSink
from bot.messages import Decision, Message, ModelReply, Outcome, ToolCall, ToolSpec
from bot.tools.base import ToolRegistry
from bot.tools.tool import ToolResult
from bot.turn import TurnState

log = logging.getLogger(__name__)

#: stores the turn's new messages (``TurnState.unsaved``), before the calls they end with run
Journal = Callable[[TurnState], Awaitable[None]]

EMPTY_ANSWER = "I could not come up with an answer. Please rephrase the question."
CUT_OFF_NOTE = "\n\n_(This answer was cut off: it was longer than the model may write.)_"
FILTERED_ANSWER = "I can't help with that request."
CAPPED_NOTE = (
    "You have used all {} tool rounds for this message. Answer now without tools: say what "
    "you found and did so far, and what is left to do."
)
NOT_APPROVED = "Not done: the action was not approved."
TOO_LONG = "The answer took too long, so I stopped. Please try again."
NOT_IN_CHANNEL = (
    "Not done: the tool '{}' is not available in this channel (its admins choose the "
    "channel's tools)."
)
#: a channel's own instructions go below the bot's system prompt, whose rules still hold
CHANNEL_INSTRUCTIONS = (
    "Instructions for this channel, from its admins (the rules above still hold):\n{}"
)


@dataclass
class Conversation:
    """What a run of a turn sends the model: the older ``history`` (what a trim may
    drop, oldest first) and the turn's own messages (its question and its rounds: never
    dropped; a journal cut short by a crash is sent repaired)."""

    history: list[Message]
    turn: list[Message]
    #: the history was trimmed once already after the model found it too long
    trimmed: bool = False

    @property
    def messages(self) -> list[Message]:
        return [*self.history, *repair(self.turn)]

    def trim(self) -> bool:
        """Drop the oldest whole turns of the history, leaving about a quarter of its
        tokens; False when there is nothing to drop or it was trimmed before."""
        if self.trimmed or not self.history:
            return False
        self.trimmed = True
        self.history = fewer_turns(self.history)
        return True


@dataclass
class Loop:
    """The loop's fixed parts: model, tools, system message, round cap and deadline, and
    the bot's own write approval (WRITE_APPROVAL: off where not given)."""

    model: ChatModel
    registry: ToolRegistry
    system: str
    max_rounds: int = 5
    deadline_s: float = 300.0
    #: model requests in flight at once (None: no limit)
    slots: ModelSlots | None = None
    #: whether a write waits for a person where the channel does not say (WRITE_APPROVAL)
    write_approval: bool = False

    async def run(
        self,
        state: TurnState,
        observer: TurnObserver = UNOBSERVED,
        journal: Journal | None = None,
    ) -> TurnState:
        """Run the turn on from where ``state`` stands: first the calls that wait in
        ``state.pending`` (as ``state.decisions`` say), then rounds until an answer, a pause
        for approval, or the cap. ``journal`` stores the turn's new messages before a round's
        calls run. Tool sources still connecting are waited for (bounded: see
        ``ToolRegistry.ready_for_turn``); a new turn then waits for a model slot. Never
        raises ModelError: a failing model is the state's error."""
        state.outcome, state.answer = Outcome.RUNNING, None
        conversation = Conversation(list(state.history), state.messages)
        turn = _Turn(state, observer, journal)

        async def rounds() -> None:
            # a turn soon after start-up: the MCP servers still connecting get a moment
            await self.registry.ready_for_turn()
            if self.slots is not None and state.rounds == 0 and state.pending is None:
                await self.slots.admit()
            pending, state.pending = state.pending, None
            if pending is not None:
                await self._run_calls(pending, conversation, turn, state.decisions)
            await self._rounds(conversation, turn)

        try:
            async with asyncio.timeout(self.deadline_s):
                await rounds()
        except TimeoutError:
            state.fail(ModelTimeout(TOO_LONG))
        except ModelError as exc:
            state.fail(exc)
        state.recovering = False
        return state

    async def _rounds(self, conversation: Conversation, turn: _Turn) -> None:
        state = turn.state
        specs = [spec for spec in self.registry.specs() if state.channel.offers(spec.name)]
        while True:
            capped = state.rounds - state.round_base >= self.max_rounds
            reply = await self._ask(conversation, [] if capped else specs, turn, capped)
            state.usage += reply.usage
            if not reply.tool_calls or capped:
                self._finish(reply, conversation, state, capped)
                return
            calls = tuple(self._marked(call, state) for call in reply.tool_calls)
            decisions = self._decide(calls, state)
            if any(d.action == "interrupt" for d in decisions.values()):
                calls = await self._previewed(calls, decisions)
                assistant = _counted(Message.assistant(reply.content, calls, reply.replay))
                state.outcome, state.pending = Outcome.AWAITING_APPROVAL, assistant
                return
            assistant = _counted(Message.assistant(reply.content, calls, reply.replay))
            await self._run_calls(assistant, conversation, turn, decisions)

    def _marked(self, call: ToolCall, state: TurnState) -> ToolCall:
        """A writing call gets its idempotency marker before anything is stored, and the
        arguments it leaves out that its channel's settings give (a Jira project)."""
        call = self.registry.with_defaults(call, state.channel.argument_defaults())
        if call.marker is None and self.registry.writes(call.name):
            return dataclasses.replace(call, marker=f"bot-{secrets.token_hex(5)}")
        return call

    async def _previewed(
        self, calls: Sequence[ToolCall], decisions: dict[str, Decision]
    ) -> tuple[ToolCall, ...]:
        """The calls, each one that waits for a person with the change it would make in
        words (stored with it, so the card says the same whenever it is shown)."""

        async def previewed(call: ToolCall) -> ToolCall:
            if decisions[call.id].action != "interrupt":
                return call
            return dataclasses.replace(call, preview=await self.registry.preview(call))

        return tuple(await asyncio.gather(*(previewed(call) for call in calls)))

    def _decide(self, calls: Sequence[ToolCall], state: TurnState) -> dict[str, Decision]:
        """The approval rule (bot.agent.approval) for each call of a round."""
        channel = state.channel
        # a tool the channel does not offer is refused when it runs, never asked about
        return {
            call.id: decide(
                self.registry.writes(call.name) and channel.offers(call.name),
                channel,
                self.write_approval,
                state.external,
            )
            for call in calls
        }

    async def _complete(
        self, system: str, messages: list[Message], specs: Sequence[ToolSpec], turn: _Turn
    ) -> ModelReply:
        """One model request, traced and counted, its observer told."""
        await turn.observer.on_model_start(turn.state)
        with telemetry.model_request(self.model.model, self.model.api, system, messages) as request:
            reply = await self.model.complete(system, messages, specs, turn.on_text)
            request.replied(reply)
        await turn.observer.on_model_end(turn.state, reply)
        return reply

    async def _ask(
        self, conversation: Conversation, specs: Sequence[ToolSpec], turn: _Turn, capped: bool
    ) -> ModelReply:
        # at the cap, the forced answer should say what was done and what is left: the
        # bot's instruction goes with the system message, never as the person's words
        system = self.system
        instructions = turn.state.channel.instructions
        if instructions:
            system = f"{system}\n\n{CHANNEL_INSTRUCTIONS.format(instructions)}"
        if capped:
            system = f"{system}\n\n{CAPPED_NOTE.format(turn.state.rounds)}"
        started = time.perf_counter()
        async with self.slots.request() if self.slots else contextlib.nullcontext():
            try:
                reply = await self._complete(system, conversation.messages, specs, turn)
            except ModelError as exc:
                # the estimate let in more than this model takes: once, with less history
                before = len(conversation.history)
                if exc.kind != "context_length" or not conversation.trim():
                    raise
                log.warning(
                    "context length exceeded in round %d; retrying with %d of %d history messages",
                    turn.state.rounds + 1,
                    len(conversation.history),
                    before,
                )
                reply = await self._complete(system, conversation.messages, specs, turn)
        log.debug("model answered in %.0f ms", (time.perf_counter() - started) * 1000)
        return reply

    async def _run_calls(
        self,
        assistant: Message,
        conversation: Conversation,
        turn: _Turn,
        decisions: dict[str, Decision],
    ) -> None:
        """Run one round's calls (in parallel; results in call order) and record them. The
        journal gets the round before its calls run (unless it holds it already: a turn
        recovering from a crash)."""
        state, observer = turn.state, turn.observer
        recovering = state.recovering
        if not recovering:
            conversation.turn.append(assistant)
            await turn.save()
        calls = assistant.tool_calls
        await observer.on_tools_start(state, calls)

        async def outcome(call: ToolCall) -> ToolResult:
            decision = decisions.get(call.id, APPROVAL)
            if decision.action != "approve":
                return ToolResult.error(decision.reason or NOT_APPROVED)
            if not state.channel.offers(call.name):  # taken away while the turn waited
                return ToolResult.error(NOT_IN_CHANNEL.format(call.name))
            if recovering and self.registry.writes(call.name):
                return await self.registry.recover(call)
            return await self.registry.run(call)

        async def told(call: ToolCall) -> ToolResult:
            result = await outcome(call)
            await observer.on_tool_end(state, call, result)
            return result

        results = await asyncio.gather(*(told(call) for call in calls))
        conversation.turn += [
            _counted(Message.tool_result(c, r.output)) for c, r in zip(calls, results, strict=True)
        ]
        state.recovering = False
        state.rounds += 1
        state.tools_called += [call.name for call in calls]
        if any(self.registry.writes(call.name) for call in calls):
            await turn.save()  # what it changed, at once

    def _finish(
        self, reply: ModelReply, conversation: Conversation, state: TurnState, capped: bool
    ) -> None:
        answer = reply.content or EMPTY_ANSWER
        if reply.finish == "length":
            answer += CUT_OFF_NOTE
        elif reply.finish == "content_filter":
            answer = FILTERED_ANSWER
        if capped:
            log.warning(
                "turn hit the round cap after %d rounds; last tool %s; answer forced",
                state.rounds,
                state.tools_called[-1] if state.tools_called else "none",
            )
        state.outcome = (
            Outcome.TRUNCATED
            if reply.finish == "length"
            else Outcome.MAX_ROUNDS
            if capped
            else Outcome.ANSWERED
        )
        conversation.turn.append(_counted(Message.assistant(answer)))
        state.answer = answer


@dataclass
class _Turn:
    """One run of a turn as the loop runs it: its state, its observer, its journal."""

    state: TurnState
    observer: TurnObserver
    journal: Journal | None

    @property
    def on_text(self) -> TextSink | None:
        if not self.observer.streams_text:
            return None
        state, observer = self.state, self.observer

        async def on_text(delta: str) -> None:
            await observer.on_text(state, delta)

        return on_text

    async def save(self) -> None:
        if self.journal is not None:
            await self.journal(self.state)


def _counted(message: Message) -> Message:
    return message.with_(tokens=count_message(message))
