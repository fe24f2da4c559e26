"""Sweeper: what was left behind, swept by every process.

* Approval requests left unanswered for APPROVAL_TIMEOUT_S expire, and their cards say so.
  The store marks each turn expired in one update, and a card updated twice reads the same.
* Questions of a process that died (their claim's lease ran out) are taken over, every
  TAKE_OVER_EVERY, by one process: answered, or their stored answer posted (see
  ``TurnRunner.take_over_abandoned``).

Stop the sweeper before the TurnRunner: a process shutting down takes nothing over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from bot.messages import utcnow
from bot.slack.delivery import EXPIRED
from bot.slack.turns import TurnRunner
from bot.store.events import TAKE_OVER_EVERY

log = logging.getLogger(__name__)

#: sweep approvals at least this often (and more often for a short timeout, so it expires
#: on time)
SWEEP_EVERY_S = 60.0


class Sweeper:
    def __init__(self, runner: TurnRunner, timeout_s: float) -> None:
        self.runner = runner
        self.delivery = runner.delivery
        self.timeout = timedelta(seconds=timeout_s)
        self.every_s = min(SWEEP_EVERY_S, max(timeout_s / 4, 0.1))
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(
                self._repeat(self.expire_approvals, self.every_s, "expired approval requests")
            ),
            asyncio.create_task(
                self._repeat(
                    self.runner.take_over_abandoned,
                    TAKE_OVER_EVERY.total_seconds(),
                    "the claims of dead processes",
                )
            ),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def expire_approvals(self) -> int:
        expired = await self.delivery.store.expire_paused_turns(utcnow() - self.timeout)
        for turn in expired:
            card = (turn.state or {}).get("card")
            log.info("approval request of turn %s expired", turn.id)
            if card:
                text, blocks = self.delivery.card(turn, f":hourglass: {EXPIRED}")
                await self.delivery.replies.update(card["channel"], card["ts"], text, blocks)
        return len(expired)

    @staticmethod
    async def _repeat(sweep: Callable[[], Awaitable[int]], every_s: float, what: str) -> None:
        while True:
            try:
                await sweep()
            except (SQLAlchemyError, OSError):
                log.warning("could not sweep %s", what)
            await asyncio.sleep(every_s)
