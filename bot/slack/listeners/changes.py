"""``message_deleted`` and ``message_changed``: a message deleted or edited in Slack is
deleted or edited in the stored history too; ``channel_deleted`` and ``group_deleted``: all
that is kept of the channel goes (their jobs are in the inbox already: see bot.slack.app;
this only acknowledges them)."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.slack.events import CHANNEL_DELETIONS
from bot.slack.worker import Worker


def register(app: AsyncApp, worker: Worker) -> None:
    @app.event({"type": "message", "subtype": ("message_deleted", "message_changed")})
    async def follow() -> None:
        return None

    for deletion in CHANNEL_DELETIONS:
        app.event(deletion)(follow)
