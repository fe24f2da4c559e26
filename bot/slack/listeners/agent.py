"""``app_home_opened`` on the Messages tab: a person opened the bot's DM (Slack's agent
view), and the prompts for the three things it does best are pinned at its top. A message
there, or in one of its threads, is a DM like any other (bot.slack.listeners.direct_messages)."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.slack.worker import Worker

PROMPTS = [
    {"title": "Summarise an account", "message": "Look up Ana and summarise her account"},
    {"title": "Open a ticket", "message": "Find Ana and open a ticket for her"},
    {"title": "Ticket status", "message": "What is the status of TASK-123?"},
]
TITLE = "Try one of these:"


def register(app: AsyncApp, worker: Worker) -> None:
    @app.event("app_home_opened")
    async def suggest(event: dict[str, Any]) -> None:
        if event.get("tab") == "messages" and isinstance(event.get("channel"), str):
            await worker.poster.set_suggested_prompts(event["channel"], PROMPTS, TITLE)
