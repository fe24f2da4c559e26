"""``message`` from a person: a DM to the bot (or a channel message that mentions it, when
the app also subscribes to channel messages; it is then answered once with its app_mention)."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp, AsyncBoltContext

from bot.slack.events import ANSWERED_SUBTYPES
from bot.slack.worker import Worker


def register(app: AsyncApp, worker: Worker) -> None:
    @app.event({"type": "message", "subtype": tuple(ANSWERED_SUBTYPES)})
    async def answer_message(context: AsyncBoltContext) -> None:
        worker.acknowledged(context["question"])
