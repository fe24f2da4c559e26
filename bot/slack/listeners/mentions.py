"""``app_mention``: someone asked the bot in a channel."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp, AsyncBoltContext

from bot.slack.worker import Worker


def register(app: AsyncApp, worker: Worker) -> None:
    @app.event("app_mention")
    async def answer_mention(context: AsyncBoltContext) -> None:
        worker.acknowledged(context["question"])
