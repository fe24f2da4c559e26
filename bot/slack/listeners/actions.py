"""``block_actions``: Create, Cancel or Continue pressed on one of the bot's messages."""

from __future__ import annotations

import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.slack.cards import APPROVE, CONTINUE, DECLINE
from bot.slack.events import press_from
from bot.slack.turns import TurnRunner

BUTTONS = re.compile(f"^({APPROVE}|{DECLINE}|{CONTINUE})$")


def register(app: AsyncApp, runner: TurnRunner) -> None:
    @app.action(BUTTONS)
    async def pressed(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        press = press_from(body)
        if press is not None:
            runner.press(press)
