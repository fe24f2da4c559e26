"""``block_actions``: Create, Cancel, Continue or a feedback button pressed on one of the
bot's messages (the press is a job of its channel already: see bot.slack.app)."""

from __future__ import annotations

import re

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.slack.cards import PRESSES
from bot.slack.worker import Worker

PATTERN = re.compile("^(" + "|".join(sorted(PRESSES)) + ")$")


def register(app: AsyncApp, worker: Worker) -> None:
    @app.action(PATTERN)
    async def pressed(ack: AsyncAck) -> None:
        await ack()
