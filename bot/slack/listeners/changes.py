"""``message_deleted`` and ``message_changed``: a message deleted or edited in Slack is
deleted or edited in the stored history too."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp, AsyncBoltContext

from bot.slack.turns import TurnRunner


def register(app: AsyncApp, runner: TurnRunner) -> None:
    @app.event({"type": "message", "subtype": ("message_deleted", "message_changed")})
    async def follow(context: AsyncBoltContext) -> None:
        runner.follow(context["change"])
