"""Writing tools wait for a person: pause, resume once, decline, expire (core level)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest

from bot.agent.approval import APPROVAL
from bot.agent.conversations import Incoming
from bot.config import load_settings
from bot.messages import Decision
from bot.tools.tool import tool
from bot.wiring import build_services
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse
from tests.observers import Watching
from tests.stored_turns import history


class Tickets:
    def __init__(self) -> None:
        self.created: list[str] = []

    @tool(writes=True, preview="say_create")
    def create_ticket(self, summary: str) -> dict[str, str]:
        """Create a ticket."""
        self.created.append(summary)
        return {"key": f"TASK-{len(self.created)}"}

    def say_create(self, summary: str) -> str:
        return f"Create ticket {len(self.created) + 1}: {summary}"


@pytest.fixture
async def setup(database_url, fake_openai):  # type: ignore[no-untyped-def]
    settings = load_settings(
        DATABASE_URL=database_url, OPENAI_API_KEY="test-key", OPENAI_BASE_URL=fake_openai.base_url
    )
    services = build_services(settings)
    tickets = Tickets()
    services.registry.add_object(tickets)
    yield services, tickets
    await services.close()


async def test_pause_then_approve_runs_the_write_once(setup, fake_openai: FakeOpenAI) -> None:
    services, tickets = setup
    conversations = services.conversations
    fake_openai.script(
        Reply(
            tool_calls=[
                ToolUse("get_current_time", {}, "r1"),
                ToolUse("create_ticket", {"summary": "Printer on fire"}, "w1"),
            ]
        ),
        Reply(text="Created TASK-1."),
    )

    paused = await conversations.ask(Incoming("C1", "open a ticket", "U1", "1.1"), Watching())

    assert paused.outcome == "awaiting_approval" and tickets.created == []
    assert [c.id for c in paused.interruptions] == ["w1"]
    assert [m.role for m in await history(services).messages("C1")] == ["user"]
    # what the card says the write will do, read as the turn paused and stored with it
    waiting = await conversations.turn(paused.turn_id)
    assert [c.preview for c in conversations.interruptions(waiting)] == [
        "Create ticket 1: Printer on fire"
    ]

    first, second = await asyncio.gather(
        conversations.resume(paused.turn_id, {"w1": APPROVAL}),
        conversations.resume(paused.turn_id, {"w1": APPROVAL}),
    )

    replies = [r for r in (first, second) if r is not None]
    assert len(replies) == 1 and replies[0].text == "Created TASK-1."
    assert tickets.created == ["Printer on fire"]
    stored = await history(services).messages("C1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    assert json.loads(stored[3].content) == {"key": "TASK-1"}
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "answered" and turn.rounds == 1
    assert await conversations.resume(paused.turn_id, {"w1": APPROVAL}) is None
    assert all(r.status == 200 for r in fake_openai.requests)


async def test_declined_write_is_explained_to_the_model(setup, fake_openai: FakeOpenAI) -> None:
    services, tickets = setup
    fake_openai.script(
        ToolUse("create_ticket", {"summary": "x"}, "w1"), Reply(text="OK, I did not create it.")
    )
    paused = await services.conversations.ask(Incoming("C1", "ticket please"), Watching())

    reply = await services.conversations.resume(
        paused.turn_id, {"w1": Decision.reject("The person declined.")}
    )

    assert reply.text == "OK, I did not create it." and tickets.created == []
    assert "The person declined." in json.dumps(fake_openai.requests[-1].body)


async def test_other_turns_go_on_while_one_waits(setup, fake_openai: FakeOpenAI) -> None:
    services, tickets = setup
    fake_openai.script(ToolUse("create_ticket", {"summary": "x"}, "w1"), "meanwhile", "created")
    paused = await services.conversations.ask(Incoming("C1", "ticket"), Watching())
    other = await services.conversations.ask(Incoming("C1", "something else"))
    assert other.text == "meanwhile"
    done = await services.conversations.resume(paused.turn_id, {"w1": APPROVAL})
    assert done.text == "created" and tickets.created == ["x"]
    assert all(r.status == 200 for r in fake_openai.requests)


async def test_expired_request_does_nothing(setup, fake_openai: FakeOpenAI) -> None:
    services, tickets = setup
    services.conversations.approval_timeout = timedelta(seconds=0)
    fake_openai.script(ToolUse("create_ticket", {"summary": "x"}, "w1"))
    paused = await services.conversations.ask(Incoming("C1", "ticket"), Watching())

    reply = await services.conversations.resume(paused.turn_id, {"w1": APPROVAL})

    assert reply.outcome == "expired" and tickets.created == []
    (turn,) = await history(services).turns("C1")
    assert turn.outcome == "expired"


async def test_round_cap_can_be_continued_once(database_url, fake_openai: FakeOpenAI) -> None:
    settings = load_settings(
        DATABASE_URL=database_url,
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=fake_openai.base_url,
        MAX_TOOL_ROUNDS=2,
    )
    services = build_services(settings)
    try:
        fake_openai.responder = lambda request: (
            ToolUse("get_current_time", {}) if request.tool_names else Reply(text="So far...")
        )
        capped = await services.conversations.ask(Incoming("C1", "dig deep"))
        assert capped.outcome == "max_rounds" and capped.text == "So far..."
        # the forced request told the model to sum up; it is not stored
        assert "used all 2 tool rounds" in json.dumps(fake_openai.requests[-1].body)
        assert "used all" not in json.dumps(
            [m.content for m in await history(services).messages("C1")]
        )

        fake_openai.reset()
        fake_openai.script(ToolUse("get_current_time", {}), Reply(text="All done."))
        again = await services.conversations.resume(capped.turn_id)

        assert again.text == "All done." and again.outcome == "answered"
        assert len(fake_openai.requests) == 2 and fake_openai.requests[0].status == 200
        (turn,) = await history(services).turns("C1")
        assert turn.rounds == 3 and turn.outcome == "answered"
        assert await services.conversations.resume(capped.turn_id) is None
    finally:
        await services.close()
