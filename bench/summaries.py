"""What summaries cost: 200 turns in one channel at the default HISTORY_TOKEN_BUDGET, on
the in-process ScriptedModel and a SQLite file, with HISTORY_SUMMARY on and off.

Prints the tokens sent to the model per turn (every request's system prompt and messages,
the summary requests included) and the summary requests per turn. The targets: with
summaries on, at most 1.25 times the tokens of off, and at most one extra request in five
turns. Each scripted summary fills 80% of the summary's share of the budget (a model that
writes long ones).

    uv run python bench/summaries.py [--turns 200] [--budget 12000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.agent.conversations import Incoming
from bot.agent.loop import Loop
from bot.agent.memory import SUMMARY_PROMPT
from bot.agent.tokens import count_message, count_text
from bot.config import ConversationSettings
from bot.llm.scripted import Request, ScriptedModel
from bot.store.db import create_engines
from bot.store.migrate import upgrade
from bot.tools.base import ToolRegistry
from bot.tools.clock import get_current_time
from bot.wiring import build_conversations

WORDS = (
    "the customer asked about the renewal of their contract and the open tickets on the "
    "billing project before the next quarterly review with their account owner"
).split()


def text(words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(words))


class Model(ScriptedModel):
    """Answers every turn with about 250 tokens and every summary request with a summary
    that fills 80% of the summary's share of ``budget``."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.summary_words = budget // 4 * 8 // 10 * 3 // 4

    def reply(self, request: Request) -> str:
        if request.system.startswith(SUMMARY_PROMPT[:40]):
            return text(self.summary_words, len(self.requests))
        return f"About TASK-{len(self.requests)}: " + text(190, len(self.requests))


def sent(request: Request) -> int:
    return count_text(request.system) + sum(count_message(m) for m in request.messages)


def measure(turns: int, budget: int, summaries: bool, directory: Path) -> tuple[int, int]:
    """The tokens sent in all, and the summary requests, of ``turns`` turns."""
    url = f"sqlite:///{directory / ('on.db' if summaries else 'off.db')}"
    upgrade(url)  # before the event loop: Alembic runs one of its own
    return asyncio.run(run(turns, budget, summaries, url))


async def run(turns: int, budget: int, summaries: bool, url: str) -> tuple[int, int]:
    engines = create_engines(url)
    model, registry = Model(budget), ToolRegistry()
    registry.add(get_current_time)
    loop = Loop(model, registry, "You are a work assistant in Slack. " + text(60, 0))
    settings = ConversationSettings(HISTORY_TOKEN_BUDGET=budget, HISTORY_SUMMARY=summaries)
    conversations = build_conversations(engines, loop, settings)
    try:
        for turn in range(turns):
            model.then(model.reply, model.reply)
            question = f"Question {turn} about TASK-{turn}: " + text(45, turn)
            reply = await conversations.ask(Incoming("C1", question, "U1", f"{turn}.1"))
            assert reply.ok, reply.text
            model.script.clear()
    finally:
        await engines.dispose()
    summary_requests = sum(1 for r in model.requests if not r.tools)
    return sum(sent(r) for r in model.requests), summary_requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--budget", type=int, default=12000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        off, _ = measure(args.turns, args.budget, False, Path(directory))
        on, extra = measure(args.turns, args.budget, True, Path(directory))
    print(f"{args.turns} turns in one channel, HISTORY_TOKEN_BUDGET={args.budget}")
    print(f"tokens sent per turn, summaries off: {off / args.turns:,.0f}")
    print(f"tokens sent per turn, summaries on:  {on / args.turns:,.0f} ({on / off:.2f}x off)")
    print(f"summary requests: {extra} ({extra / args.turns:.3f} per turn)")


if __name__ == "__main__":
    main()
