"""Conversations on an in-process ScriptedModel and a real database: a new turn, a turn a
person lets go on, and a turn whose process died all go on from a loaded TurnState."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.agent.approval import APPROVAL
from bot.agent.conversations import Conversations, Incoming
from bot.agent.loop import Loop
from bot.config import ConversationSettings
from bot.llm.scripted import ScriptedModel
from bot.messages import Message, ModelReply, Outcome, ToolCall
from bot.store.db import create_engines
from bot.tools.base import ToolRegistry
from bot.turn import TurnState
from bot.wiring import build_conversations
from tests.unit.agent.test_loop import Desk, calls


@pytest.fixture
async def setup(database_url: str) -> AsyncIterator[tuple[Conversations, ScriptedModel, Desk]]:
    engines = create_engines(database_url)
    model, desk, registry = ScriptedModel(), Desk(), ToolRegistry()
    registry.add_object(desk)
    loop = Loop(model, registry, "You are a test.", write_approval=True)  # writes wait
    settings = ConversationSettings(HISTORY_SUMMARY=False)
    yield build_conversations(engines, loop, settings), model, desk
    await engines.dispose()


async def test_a_paused_turn_goes_on_when_approved(
    setup: tuple[Conversations, ScriptedModel, Desk],
) -> None:
    conversations, model, desk = setup
    model.then(calls("create_ticket"), "Created T-1.")

    paused = await conversations.ask(Incoming("C1", "open a ticket", "U1", "1.1"))
    assert paused.outcome == Outcome.AWAITING_APPROVAL and desk.created == {}
    assert paused.turn_id is not None and [c.name for c in paused.interruptions] == [
        "create_ticket"
    ]

    done = await conversations.resume(paused.turn_id, {paused.interruptions[0].id: APPROVAL})

    assert done is not None and done.text == "Created T-1." and done.ok
    assert list(desk.created.values()) == ["x"]
    assert (
        await conversations.resume(paused.turn_id, {paused.interruptions[0].id: APPROVAL}) is None
    )
    stored = await conversations.history.messages("C1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    (turn,) = await conversations.history.turns("C1")
    assert turn.outcome == Outcome.ANSWERED and turn.rounds == 1 and turn.pending is None


async def test_a_turn_cut_short_mid_round_goes_on_from_its_journal(
    setup: tuple[Conversations, ScriptedModel, Desk],
) -> None:
    """A process stored a round that writes, then died -> taken on again, the write is
    looked up by its marker (not sent twice) and the model is asked once more."""
    conversations, model, desk = setup
    call = ToolCall("c0", "create_ticket", '{"summary": "x"}', marker="bot-1")
    state = TurnState(
        channel_id="C1", user_id="U1", slack_ts="2.1", messages=[Message.user("ticket please")]
    )
    await conversations.turns.begin(state, 12_000)
    state.messages.append(Message.assistant(None, (call,)))
    await conversations.turns.save(state)  # ...and the process died here
    model.then(lambda request: ModelReply(f"Found it: {request.messages[-1].content}"))

    reply = await conversations.ask(Incoming("C1", "ticket please", "U1", "2.1"), resumed=True)

    assert reply.ok and reply.text == 'Found it: {"key": "T-1", "found": "yes"}'
    assert desk.created == {} and len(model.requests) == 1
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool"]
    (turn,) = await conversations.history.turns("C1")
    assert turn.outcome == Outcome.ANSWERED and turn.rounds == 1
    assert turn.tools_called == ["create_ticket"]
