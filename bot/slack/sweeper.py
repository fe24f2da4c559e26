"""Sweeper: approval requests left unanswered for APPROVAL_TIMEOUT_S expire, and their
cards say so. Every process sweeps; the store marks each turn expired in one update, and a
card updated twice reads the same."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from bot.messages import utcnow
from bot.slack.delivery import EXPIRED, Delivery

log = logging.getLogger(__name__)

#: sweep at least this often (and more often for a short timeout, so it expires on time)
SWEEP_EVERY_S = 60.0


class Sweeper:
    def __init__(self, delivery: Delivery, timeout_s: float) -> None:
        self.delivery = delivery
        self.timeout = timedelta(seconds=timeout_s)
        self.every_s = min(SWEEP_EVERY_S, max(timeout_s / 4, 0.1))
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._sweep_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def sweep(self) -> int:
        expired = await self.delivery.store.expire_paused_turns(utcnow() - self.timeout)
        for turn in expired:
            card = (turn.state or {}).get("card")
            log.info("approval request of turn %s expired", turn.id)
            if card:
                text, blocks = self.delivery.card(turn, f":hourglass: {EXPIRED}")
                await self.delivery.replies.update(card["channel"], card["ts"], text, blocks)
        return len(expired)

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except (SQLAlchemyError, OSError):
                log.warning("could not sweep expired approval requests")
            await asyncio.sleep(self.every_s)
