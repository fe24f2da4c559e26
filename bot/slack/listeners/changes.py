"""``message_deleted`` and ``message_changed``: a message deleted or edited in Slack is
deleted or edited in the stored history too."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp, AsyncBoltContext

from bot.slack.turns import TurnRunner


def register(app: AsyncApp, runner: TurnRunner) -> None:
    @app.event({"type": "message", "subtype": "message_deleted"})
    async def forget_deleted(context: AsyncBoltContext) -> None:
        runner.follow(context["deleted_message"])

    @app.event({"type": "message", "subtype": "message_changed"})
    async def follow_edit(context: AsyncBoltContext) -> None:
        runner.follow(context["edited_message"])
