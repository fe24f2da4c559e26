"""``message_deleted``: a message deleted in Slack is deleted from the stored history."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp, AsyncBoltContext

from bot.slack.turns import TurnRunner


def register(app: AsyncApp, runner: TurnRunner) -> None:
    @app.event({"type": "message", "subtype": "message_deleted"})
    async def forget_deleted(context: AsyncBoltContext) -> None:
        runner.forget_message(context["deleted_message"])
