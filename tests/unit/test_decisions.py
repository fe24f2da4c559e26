"""A paused turn's decisions as stored: approval, rejection, interruption, and the names an
older journal used for them."""

from __future__ import annotations

from bot.agent.approval import APPROVAL, INTERRUPTION
from bot.messages import Decision
from bot.turn import TurnState


def stopped_with(decisions: dict[str, dict[str, str]]) -> TurnState:
    state = TurnState(channel_id="C1")
    state.restore_waiting({"decisions": decisions})
    return state


def test_decisions_come_back_as_they_were_stored() -> None:
    state = TurnState(channel_id="C1")
    state.decisions = {
        "a": APPROVAL,
        "b": Decision.reject("The person said no."),
        "c": INTERRUPTION,
    }
    stored = state.waiting()
    assert stored is not None
    again = stopped_with(stored["decisions"])
    assert again.decisions == state.decisions
    assert [d.action for d in again.decisions.values()] == ["approve", "reject", "interrupt"]


def test_a_journal_stored_before_the_renaming_still_resumes() -> None:
    old = {
        "a": {"action": "run", "reason": ""},
        "b": {"action": "decline", "reason": "The person said no."},
        "c": {"action": "pause", "reason": ""},
    }
    assert stopped_with(old).decisions == {
        "a": APPROVAL,
        "b": Decision.reject("The person said no."),
        "c": INTERRUPTION,
    }
