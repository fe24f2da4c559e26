"""A memory that outlives the window, on an in-process ScriptedModel and a real database:
what fell out of a small budget is summarised, the summary opens later requests, and a
message deleted in Slack leaves every later request."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from bot import metrics
from bot.agent.conversations import Conversations, Incoming
from bot.agent.loop import Loop
from bot.agent.memory import SUMMARY_HEADING
from bot.config import ConversationSettings
from bot.errors import ModelError
from bot.llm.scripted import Request, ScriptedModel
from bot.messages import Outcome, utcnow
from bot.store.db import Engines, create_engines
from bot.store.summaries import SummaryStore
from bot.tools.base import ToolRegistry
from bot.wiring import build_conversations
from tests.unit.agent.test_loop import Desk

BUDGET = 200
FACT = "Remember this: the launch ticket is ACME-42."
FILLER = "please tell me more about the weather and the plans for the coming week"


@dataclass
class Bot:
    conversations: Conversations
    model: ScriptedModel
    summaries: SummaryStore
    engines: Engines
    #: while set, summary requests fail ("error") or come back empty ("empty")
    failing: str | None = None

    def reply(self, request: Request) -> str:
        if request.tools:
            return "ok"
        if self.failing == "error":
            raise ModelError("the model server is down")
        if self.failing == "empty":
            return ""
        keys = sorted(set(re.findall(r"[A-Z]+-\d+", request.messages[0].content or "")))
        return f"Ticket keys mentioned: {', '.join(keys) or 'none'}."

    async def ask(self, channel: str, text: str, ts: str) -> Outcome:
        self.model.then(self.reply, self.reply)  # a summary request, perhaps, and the turn
        reply = await self.conversations.ask(Incoming(channel, text, "U1", ts))
        self.model.script.clear()
        return reply.outcome

    @property
    def summary_requests(self) -> list[Request]:
        return [r for r in self.model.requests if not r.tools]

    @property
    def turn_requests(self) -> list[Request]:
        return [r for r in self.model.requests if r.tools]


@pytest.fixture
async def bot(database_url: str) -> AsyncIterator[Bot]:
    engines = create_engines(database_url)
    model, registry = ScriptedModel(), ToolRegistry()
    registry.add_object(Desk())
    loop = Loop(model, registry, "You are a test.")
    settings = ConversationSettings(HISTORY_TOKEN_BUDGET=BUDGET)
    conversations = build_conversations(engines, loop, settings)
    yield Bot(conversations, model, SummaryStore(engines), engines)
    await engines.dispose()


def history_tokens(request: Request) -> int:
    """The tokens a turn's request (a question, no rounds) carries before its question."""
    return sum(m.tokens for m in request.messages[:-1])


def carries(request: Request, text: str) -> bool:
    return any(text in (m.content or "") for m in request.messages)


async def test_what_fell_out_is_summarised_and_opens_later_requests(bot: Bot) -> None:
    assert await bot.ask("C1", FACT, "0.1") == Outcome.ANSWERED
    for i in range(1, 15):
        assert await bot.ask("C1", f"question {i}: {FILLER}", f"{i}.1") == Outcome.ANSWERED

    first = bot.summary_requests[0]
    assert first.tools == () and carries(first, "ACME-42") and carries(first, "question 1:")
    # batched: not a summary request every turn
    assert 1 < len(bot.summary_requests) <= 15 // 3
    last = bot.turn_requests[-1]
    assert (last.messages[0].content or "").startswith(SUMMARY_HEADING)
    assert last.messages[0].role == "user" and "ACME-42" in (last.messages[0].content or "")
    assert not any(FACT in (m.content or "") for m in last.messages)
    assert all(history_tokens(r) <= BUDGET for r in bot.turn_requests)
    stored = await bot.summaries.summaries("C1")
    assert len(stored) == len(bot.summary_requests)
    assert stored[-1].first_message_id < stored[-1].last_message_id


async def test_a_deleted_question_leaves_window_and_summary(bot: Bot) -> None:
    await bot.ask("C1", FACT, "0.1")
    for i in range(1, 12):
        await bot.ask("C1", f"question {i}: {FILLER}", f"{i}.1")
    assert carries(bot.turn_requests[-1], "ACME-42")
    made = len(bot.summary_requests)

    deleted, _ = await bot.conversations.delete("C1", "0.1")
    assert deleted == 1 and await bot.summaries.summaries("C1") == []
    seen = len(bot.model.requests)
    for i in range(12, 16):
        await bot.ask("C1", f"question {i}: {FILLER}", f"{i}.1")

    after = bot.model.requests[seen:]
    assert len(bot.summary_requests) > made  # rebuilt from the stored messages
    assert not any(carries(r, "ACME-42") for r in after)
    assert carries(bot.turn_requests[-1], SUMMARY_HEADING)


async def test_an_edit_or_retention_drops_the_summaries_covering_it(bot: Bot) -> None:
    for i in range(10):
        await bot.ask("C1", f"question {i}: {FILLER}", f"{i}.1")
    assert await bot.summaries.summaries("C1")
    assert await bot.conversations.edit("C1", "0.1", "the new words") == 1
    assert await bot.summaries.summaries("C1") == []

    for i in range(10, 16):
        await bot.ask("C1", f"question {i}: {FILLER}", f"{i}.1")
    assert await bot.summaries.summaries("C1")
    await bot.conversations.history.purge(older_than=utcnow())
    assert await bot.summaries.summaries("C1") == []


def summaries_counted(outcome: str) -> float:
    return metrics.REGISTRY.get_sample_value("bot_summaries_total", {"outcome": outcome}) or 0


@pytest.mark.parametrize("failing", ["error", "empty"])
async def test_a_failing_summary_request_leaves_the_turn_answered(
    bot: Bot, caplog: pytest.LogCaptureFixture, failing: str
) -> None:
    outcome = "failed" if failing == "error" else "empty"
    counted, made = summaries_counted(outcome), summaries_counted("made")
    tokens = metrics.REGISTRY.get_sample_value("bot_tokens_total", {"kind": "summary"}) or 0
    bot.failing = failing
    for i in range(12):
        assert await bot.ask("C1", f"question {i}: {FILLER}", f"{i}.1") == Outcome.ANSWERED
    failed = len(bot.summary_requests)
    assert failed >= 2  # tried again at the next turn
    warnings = [r for r in caplog.records if r.name == "bot.agent.memory"]
    assert len(warnings) == failed and all(r.levelno == logging.WARNING for r in warnings)
    assert all(history_tokens(r) <= BUDGET for r in bot.turn_requests)
    assert not carries(bot.turn_requests[-1], SUMMARY_HEADING)
    assert await bot.summaries.summaries("C1") == []
    assert summaries_counted(outcome) - counted == failed

    bot.failing = None
    await bot.ask("C1", f"question 12: {FILLER}", "12.1")
    assert len(bot.summary_requests) == failed + 1
    assert carries(bot.turn_requests[-1], SUMMARY_HEADING)
    assert summaries_counted("made") - made == 1
    (stored,) = await bot.summaries.summaries("C1")
    assert metrics.REGISTRY.get_sample_value("bot_tokens_total", {"kind": "summary"}) == (
        tokens + stored.tokens
    )


async def test_a_budget_of_nothing_asks_for_no_summary(database_url: str) -> None:
    engines = create_engines(database_url)
    model, registry = ScriptedModel(), ToolRegistry()
    registry.add_object(Desk())
    loop = Loop(model, registry, "You are a test.")
    conversations = build_conversations(engines, loop, ConversationSettings(HISTORY_TOKEN_BUDGET=0))
    try:
        for i in range(3):
            model.then("ok")
            assert (await conversations.ask(Incoming("C1", f"question {i}: {FILLER}"))).ok
    finally:
        await engines.dispose()

    assert [len(r.messages) for r in model.requests] == [1, 1, 1]
    assert all(r.tools for r in model.requests)
