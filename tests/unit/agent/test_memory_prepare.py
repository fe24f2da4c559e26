"""What a request carries of the past (bot.agent.memory), on an in-process ScriptedModel and
a real database: a question asked in a thread shows the thread's messages the history does
not hold; a channel of 2,000 messages is summarised whole, a few requests a turn, and
rebuilt after a deletion keeping every fact but the deleted one; a summary request waits
for a model slot as any request does."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy import insert

from bot.agent.conversations import Conversations, Incoming
from bot.agent.limits import ModelSlots
from bot.agent.loop import Loop
from bot.agent.memory import SUMMARY_HEADING, SUMMARY_REQUESTS
from bot.agent.tokens import count_message
from bot.config import ConversationSettings
from bot.context import Context, ContextLine
from bot.llm.scripted import Request, ScriptedModel
from bot.messages import Message, utcnow
from bot.store.db import Engines, create_engines
from bot.store.models import MessageRow, TurnRow
from bot.store.summaries import SummaryStore
from bot.tools.base import ToolRegistry
from bot.wiring import build_conversations
from tests.unit.agent.test_loop import Desk

CHANNEL = "C1"
#: a fact the summaries must keep, one every 100 turns
FACT = re.compile(r"FACT-\d+")


def summarise_facts(request: Request) -> str:
    """A summariser that keeps every fact marked in what it is given (the earlier summary
    and the transcript); a turn's request (tools offered) is answered "ok"."""
    if request.tools:
        return "ok"
    text = "\n".join(m.content or "" for m in request.messages)
    return "Facts: " + ", ".join(sorted(set(FACT.findall(text)))) + "."


@dataclass
class Bot:
    conversations: Conversations
    model: ScriptedModel
    engines: Engines

    async def ask(self, text: str, ts: str, context: Context | None = None) -> list[Request]:
        """One turn; the requests it made."""
        before = len(self.model.requests)
        self.model.then(*[summarise_facts] * (SUMMARY_REQUESTS + 1))
        incoming = Incoming(CHANNEL, text, "U1", ts, context=context or Context())
        assert (await self.conversations.ask(incoming)).ok
        self.model.script.clear()
        return self.model.requests[before:]


def make_bot(engines: Engines, slots: ModelSlots | None = None, **settings: object) -> Bot:
    model, registry = ScriptedModel(), ToolRegistry()
    registry.add_object(Desk())
    loop = Loop(model, registry, "You are a test.", slots=slots)
    conversations = build_conversations(engines, loop, ConversationSettings(**settings))
    return Bot(conversations, model, engines)


@pytest.fixture
async def engines(database_url: str) -> AsyncIterator[Engines]:
    engines = create_engines(database_url)
    yield engines
    await engines.dispose()


async def seed(engines: Engines, turns: int) -> None:
    """``turns`` answered turns in the channel, a question and its answer each; every
    100th question tells a fact, its Slack ts ``n.1``."""
    start = utcnow() - timedelta(days=1)
    async with engines.writes.begin() as connection:
        ids = (
            await connection.execute(
                insert(TurnRow).returning(TurnRow.id, sort_by_parameter_order=True),
                [
                    {"channel_id": CHANNEL, "outcome": "answered", "started_at": start}
                    for _ in range(turns)
                ],
            )
        ).scalars()
        rows = []
        for n, turn_id in enumerate(ids):
            told = f"Remember FACT-{n:04d}." if n % 100 == 0 else "and the weather?"
            for offset, message in enumerate(
                (Message.user(f"question {n}: {told}"), Message.assistant(f"answer {n}"))
            ):
                rows.append(
                    {
                        "channel_id": CHANNEL,
                        "position": 2 * n + offset + 1,
                        "turn_id": turn_id,
                        "role": message.role,
                        "content": message.content,
                        "slack_ts": f"{n}.1" if offset == 0 else None,
                        "tokens": count_message(message),
                        "created_at": start + timedelta(seconds=n),
                    }
                )
        await connection.execute(insert(MessageRow), rows)


def carried_facts(request: Request) -> set[str]:
    """The facts a turn's request carries in its summary."""
    summary = request.messages[0].content or ""
    return set(FACT.findall(summary)) if summary.startswith(SUMMARY_HEADING) else set()


async def test_two_thousand_messages_are_summarised_whole_and_rebuilt_without_the_deleted(
    engines: Engines,
) -> None:
    bot = make_bot(engines, HISTORY_TOKEN_BUDGET=2000)
    await seed(engines, 1000)
    told = {f"FACT-{n:04d}" for n in range(0, 1000, 100)}

    async def until_summarised(first: int) -> Request:
        """Turns until one carries a summary again: each makes at most SUMMARY_REQUESTS
        summary requests, and carries the window alone meanwhile."""
        for n in range(first, first + 10):
            requests = await bot.ask(f"later question {n}", f"{2000 + n}.1")
            *summaries, turn = requests
            assert turn.tools and not any(r.tools for r in summaries)
            assert len(summaries) <= SUMMARY_REQUESTS
            if carried_facts(turn):
                return turn
            assert not (turn.messages[0].content or "").startswith(SUMMARY_HEADING)
        raise AssertionError("never summarised")

    made = await until_summarised(0)
    assert carried_facts(made) == told
    assert len(bot.model.requests) > SUMMARY_REQUESTS + 1  # more than one turn's worth

    deleted, _ = await bot.conversations.delete(CHANNEL, "300.1")
    assert deleted == 1
    asked = len(bot.model.requests)
    rebuilt = await until_summarised(20)

    assert carried_facts(rebuilt) == told - {"FACT-0300"}
    after = bot.model.requests[asked:]
    assert not any("FACT-0300" in (m.content or "") for r in after for m in r.messages)
    kept = (await SummaryStore(engines).summaries(CHANNEL))[-1]
    assert "FACT-0300" not in kept.text and "FACT-0900" in kept.text


async def test_a_thread_question_shows_what_the_history_does_not_hold(engines: Engines) -> None:
    bot = make_bot(engines, HISTORY_SUMMARY=False, THREAD_CONTEXT_TOKENS=60)
    await bot.ask("the printer on floor 3 is on fire", "1.1")

    def line(ts: str, text: str) -> ContextLine:
        return ContextLine(ts, "U2", text, name="Bea")

    thread = Context(
        (
            line("1.1", "the printer on floor 3 is on fire"),  # the history holds it
            line("1.2", "an old reply " * 30),  # past the budget: left out
            line("1.3", "Maintenance is on the way."),
        )
    )
    (request,) = await bot.ask("who is coming?", "1.4", thread)

    question = request.messages[-1]
    assert question.context == Context((thread.lines[2],), left_out=1)
    assert question.asked == "who is coming?"
    assert "Maintenance is on the way." in (question.content or "")
    assert "an old reply" not in (question.content or "")
    assert (question.content or "").count("the printer on floor 3") == 0
    stored = (await bot.conversations.history.messages(CHANNEL))[-2]
    assert stored.content == question.content and stored.context == question.context


async def test_a_summary_request_waits_for_a_model_slot(engines: Engines) -> None:
    slots = ModelSlots(1)
    bot = make_bot(engines, slots, HISTORY_TOKEN_BUDGET=200)
    bot.conversations.memory.timeout_s = 0.3
    await seed(engines, 20)

    async with slots.request():  # every slot taken: the summary request waits, in vain
        turn = asyncio.create_task(bot.ask("one more", "99.1"))
        await asyncio.sleep(0.5)
        assert bot.model.requests == []
    (request,) = await turn  # the turn's own request, once the slot was free

    assert not (request.messages[0].content or "").startswith(SUMMARY_HEADING)
    assert await SummaryStore(engines).summaries(CHANNEL) == []
