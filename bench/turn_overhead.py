"""The bot's own cost of one turn, as the stored history of the channel grows.

An in-process model answers at once (one tool round: a call, then the answer), so what is
measured is the bot: holding the channel (bot.jobs), the window read, the turn's journal, the
tool registry.

    uv run python bench/turn_overhead.py                       # SQLite
    uv run python bench/turn_overhead.py --postgres postgresql://postgres@127.0.0.1:5432/test

Prints p50 and p95 per stored-history size. Target: p50 at 100,000 within 1.3x of p50 at 0,
and under 10 ms on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, insert, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.agent.conversations import Incoming
from bot.config import load_settings
from bot.messages import Message, ModelReply, ToolCall, ToolSpec, Usage, utcnow
from bot.store.migrate import upgrade
from bot.store.models import MessageRow, SummaryRow, TurnRow
from bot.wiring import build_services
from tests.postgres import fresh_database

SIZES = (0, 1_000, 10_000, 100_000)
CHANNEL = "CBENCH"
#: a seeded history longer than this many messages (the default budget's worth) comes with
#: a summary of all but its newest KEPT_WHOLE, as a running bot leaves a channel
SUMMARISED_PAST = 600
KEPT_WHOLE = 300


class InstantModel:
    """Calls the clock tool once, then answers; no network, no waiting."""

    model = "instant"
    api = "chat"

    async def complete(
        self, system: str, messages: Sequence[Message], tools: Sequence[ToolSpec], on_text=None
    ) -> ModelReply:
        if messages[-1].role == "user" and tools:
            call = ToolCall(f"call_{uuid.uuid4().hex[:8]}", "get_current_time", "{}")
            return ModelReply(None, (call,), Usage(100, 10), "tool_calls")
        return ModelReply("It is now.", (), Usage(120, 5), "stop")


async def seed(engines, count: int) -> None:  # type: ignore[no-untyped-def]
    """``count`` messages in the channel: user/assistant pairs, each pair one turn; past
    SUMMARISED_PAST, a summary of all but the newest KEPT_WHOLE."""
    start = utcnow() - timedelta(days=30)
    batch = 10_000
    async with engines.writes.begin() as session:
        for first in range(0, count // 2, batch):
            pairs = range(first, min(first + batch, count // 2))
            turns = [
                {
                    "channel_id": CHANNEL,
                    "outcome": "answered",
                    "rounds": 0,
                    "tools_called": [],
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "started_at": start + timedelta(seconds=n),
                }
                for n in pairs
            ]
            ids = (
                (
                    await session.execute(
                        insert(TurnRow).returning(TurnRow.id, sort_by_parameter_order=True), turns
                    )
                )
                .scalars()
                .all()
            )
            rows = []
            for n, turn_id in zip(pairs, ids, strict=True):
                for offset, role in enumerate(("user", "assistant")):
                    rows.append(
                        {
                            "channel_id": CHANNEL,
                            "position": 2 * n + offset + 1,
                            "turn_id": turn_id,
                            "role": role,
                            "content": f"{role} message number {n} " + "words " * 10,
                            "tokens": 20,
                            "created_at": start + timedelta(seconds=n),
                        }
                    )
            await session.execute(insert(MessageRow), rows)
        if count > SUMMARISED_PAST:  # as a running bot leaves it: what left the window summarised
            mine = MessageRow.channel_id == CHANNEL
            first = await session.scalar(select(func.min(MessageRow.id)).where(mine))
            last = await session.scalar(
                select(MessageRow.id).where(mine, MessageRow.position == count - KEPT_WHOLE)
            )
            summary = {"text": "Earlier: " + "words " * 150, "tokens": 160}
            await session.execute(
                insert(SummaryRow).values(
                    channel_id=CHANNEL, first_message_id=first, last_message_id=last, **summary
                )
            )


async def measure(database_url: str, size: int, turns: int) -> list[float]:
    # every turn is U1's: the overhead, not the per-person limit, is measured
    settings = load_settings(
        DATABASE_URL=database_url, OPENAI_API_KEY="unused", RATE_LIMIT_PER_USER=0
    )
    services = build_services(settings, model=InstantModel())
    try:
        await seed(services.engines, size)

        async def handle(incoming: Incoming):  # type: ignore[no-untyped-def]
            async with services.jobs.hold(CHANNEL):  # as bot ask holds it
                return await services.conversations.ask(incoming)

        for _ in range(10):  # warm-up: connections, caches, the tokenizer
            await handle(Incoming(CHANNEL, "what time is it?", "U1"))
        timings = []
        for _ in range(turns):
            started = time.perf_counter()
            reply = await handle(Incoming(CHANNEL, "what time is it?", "U1"))
            timings.append((time.perf_counter() - started) * 1000)
            assert reply.ok, reply.text
        return timings
    finally:
        await services.close()


def fresh_sqlite(folder: Path, size: int) -> str:
    url = f"sqlite:///{folder / f'bench_{size}.db'}"
    upgrade(url)
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", help="also measure on this PostgreSQL server URL")
    parser.add_argument("--turns", type=int, default=200, help="turns measured per size")
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgresql"] if args.postgres else [])
    print(f"{'database':<11}{'stored':>9}{'p50 ms':>9}{'p95 ms':>9}{'p50/p50@0':>11}")
    with tempfile.TemporaryDirectory() as folder:
        for backend in backends:
            base = None
            for size in SIZES:
                with contextlib.ExitStack() as stack:
                    if backend == "sqlite":
                        url = fresh_sqlite(Path(folder), size)
                    else:
                        url = stack.enter_context(fresh_database(args.postgres, f"bench_{size}"))
                    timings = asyncio.run(measure(url, size, args.turns))
                p50 = statistics.median(timings)
                p95 = statistics.quantiles(timings, n=20)[18]
                base = base or p50
                print(
                    f"{backend:<11}{size:>9,}{p50:>9.2f}{p95:>9.2f}{p50 / base:>11.2f}", flush=True
                )


if __name__ == "__main__":
    main()
