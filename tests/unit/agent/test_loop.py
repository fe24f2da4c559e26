"""The loop on an in-process ScriptedModel: a TurnState in, the same state out, one observer
told what happens. No HTTP, no database."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bot.agent.approval import APPROVAL
from bot.agent.loop import CAPPED_NOTE, Loop
from bot.agent.observer import TurnObserver
from bot.errors import ModelError
from bot.llm.scripted import ScriptedModel
from bot.messages import Decision, Message, ModelReply, Outcome, ToolCall
from bot.tools.base import ToolRegistry
from bot.tools.tool import ToolResult, tool
from bot.turn import TurnState


class Desk:
    """A reading tool, and a writing one with a lookup by its marker."""

    def __init__(self) -> None:
        self.created: dict[str, str] = {}

    @tool
    def clock(self) -> str:
        """The time."""
        return "noon"

    @tool
    def broken(self) -> str:
        """Always fails."""
        raise RuntimeError("boom")

    @tool(writes=True, lookup="find_ticket")
    def create_ticket(self, summary: str, *, marker: str | None = None) -> dict[str, str]:
        """Create a ticket.

        Args:
            summary: what it is about.
        """
        self.created[marker or "none"] = summary
        return {"key": "T-1", "summary": summary}

    def find_ticket(self, marker: str, **arguments: object) -> dict[str, str]:
        return {"key": "T-1", "found": "yes"}


class Recorder(TurnObserver):
    """Keeps what it was told."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_model_start(self, state: TurnState) -> None:
        self.events.append("model")

    async def on_tools_start(self, state: TurnState, calls: Sequence[ToolCall]) -> None:
        self.events.append("tools " + ",".join(call.name for call in calls))

    async def on_tool_end(self, state: TurnState, call: ToolCall, result: ToolResult) -> None:
        self.events.append(f"{call.name} {'ok' if result.ok else 'failed'}")


def calls(*names: str) -> ModelReply:
    def call(n: int, name: str) -> ToolCall:
        return ToolCall(f"c{n}", name, '{"summary": "x"}' if name == "create_ticket" else "{}")

    return ModelReply(None, tuple(call(*c) for c in enumerate(names)), finish="tool_calls")


def loop_with(
    model: ScriptedModel, desk: Desk | None = None, max_rounds: int = 5, approval: bool = False
) -> Loop:
    registry = ToolRegistry()
    registry.add_object(desk or Desk())
    return Loop(model, registry, "You are a test.", max_rounds=max_rounds, write_approval=approval)


def question(text: str = "hello") -> TurnState:
    return TurnState(channel_id="C1", messages=[Message.user(text).with_(tokens=3)], saved=1)


async def test_a_tool_round_then_the_answer_all_in_the_state() -> None:
    model = ScriptedModel().then(calls("clock"), "It is noon.")
    saved: list[list[str]] = []

    async def journal(state: TurnState) -> None:
        saved.append([m.role for m in state.unsaved])
        state.saved = len(state.messages)

    observer = Recorder()
    state = await loop_with(model).run(question(), observer, journal)

    assert state.outcome == Outcome.ANSWERED and state.answer == "It is noon."
    assert state.rounds == 1 and state.tools_called == ["clock"]
    assert [m.role for m in state.messages] == ["user", "assistant", "tool", "assistant"]
    assert state.messages[2].content == "noon"
    assert saved == [["assistant"]]  # the round is stored before its call runs
    assert state.saved == 2 and state.unsaved == state.messages[2:]  # the rest: at finish
    assert observer.events == ["model", "tools clock", "clock ok", "model"]
    # the second request carries the call and its result, paired
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "tool"]


async def test_a_failing_tool_is_a_failed_result_the_model_reads() -> None:
    model = ScriptedModel().then(calls("broken"), "It failed.")
    observer = Recorder()
    state = await loop_with(model).run(question(), observer)

    assert observer.events[-2:] == ["broken failed", "model"]
    result = json.loads(model.requests[1].messages[-1].content or "")
    assert result == {"error": "'broken' failed unexpectedly (RuntimeError)."}
    assert state.answer == "It failed."


async def test_a_paused_write_goes_on_from_its_state_once_decided() -> None:
    desk = Desk()
    model = ScriptedModel().then(calls("create_ticket"), "Created T-1.")
    loop = loop_with(model, desk, approval=True)

    paused = await loop.run(question("open a ticket"), Recorder())

    assert paused.outcome == Outcome.AWAITING_APPROVAL and desk.created == {}
    assert paused.pending is not None and paused.pending.tool_calls[0].marker is not None
    assert [m.role for m in paused.messages] == ["user"]  # the calls wait outside the journal

    paused.decisions = {paused.pending.tool_calls[0].id: APPROVAL}
    done = await loop.run(paused, Recorder())

    assert done is paused and done.outcome == Outcome.ANSWERED and done.pending is None
    assert list(desk.created.values()) == ["x"] and done.rounds == 1
    assert len(model.requests) == 2  # the model is not asked again for the paused round


async def test_a_declined_write_is_not_run_and_the_model_reads_why() -> None:
    desk = Desk()
    model = ScriptedModel().then(calls("create_ticket"), "I did not create it.")
    loop = loop_with(model, desk, approval=True)
    state = await loop.run(question(), Recorder())
    assert state.pending is not None
    state.decisions = {state.pending.tool_calls[0].id: Decision.reject("The person said no.")}
    state = await loop.run(state, Recorder())

    assert desk.created == {} and state.answer == "I did not create it."
    assert json.loads(model.requests[1].messages[-1].content or "") == {
        "error": "The person said no."
    }


async def test_a_recovering_state_looks_its_write_up_and_never_sends_it_again() -> None:
    desk = Desk()
    model = ScriptedModel().then("It was created.")
    call = ToolCall("c0", "create_ticket", '{"summary": "x"}', marker="bot-1")
    asked = Message.assistant(None, (call,)).with_(tokens=9)
    state = question()
    state.messages.append(asked)  # stored before the crash, its call maybe sent
    state.saved, state.pending, state.recovering = 2, asked, True

    state = await loop_with(model, desk).run(state, Recorder())

    assert desk.created == {}  # looked up by its marker, not created again
    assert json.loads(model.requests[0].messages[-1].content or "") == {
        "key": "T-1",
        "found": "yes",
    }
    assert state.answer == "It was created." and state.rounds == 1


async def test_at_the_round_cap_the_model_answers_without_tools() -> None:
    model = ScriptedModel().then(calls("clock"), "So far: noon.")
    state = await loop_with(model, max_rounds=1).run(question(), Recorder())

    assert state.outcome == Outcome.MAX_ROUNDS and state.answer == "So far: noon."
    assert model.requests[1].tools == () and CAPPED_NOTE.format(1) in model.requests[1].system


async def test_a_failing_model_is_the_states_error() -> None:
    model = ScriptedModel().then(ModelError("The model is down.", kind="server"))
    state = await loop_with(model).run(question(), Recorder())

    assert state.outcome == Outcome.ERROR and state.error == "server: The model is down."
    assert state.error_message == "The model is down." and state.answer is None


async def test_the_text_streams_to_an_observer_that_asks_for_it() -> None:
    class Streaming(TurnObserver):
        streams_text = True

        def __init__(self) -> None:
            self.text: list[str] = []

        async def on_text(self, state: TurnState, delta: str) -> None:
            self.text.append(delta)

    model = ScriptedModel().then("Hello there.", "Again.")
    streaming = Streaming()
    await loop_with(model).run(question(), streaming)
    await loop_with(model).run(question(), TurnObserver())

    assert streaming.text == ["Hello there."]
    assert [r.streamed for r in model.requests] == [True, False]
