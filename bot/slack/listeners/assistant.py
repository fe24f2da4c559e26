"""The Slack AI assistant pane (the app's container in DMs), through Bolt's Assistant:
suggested prompts when a thread starts; a message there is answered like any DM (history
keyed by the DM's channel), with the steps in the pane's status line."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp, AsyncAssistant, AsyncBoltContext
from slack_bolt.context.set_suggested_prompts.async_set_suggested_prompts import (
    AsyncSetSuggestedPrompts,
)

from bot.slack.worker import Worker

PROMPTS = [
    {"title": "Summarise an account", "message": "Look up Ana and summarise her account"},
    {"title": "Open a ticket", "message": "Find Ana and open a ticket for her"},
    {"title": "Ticket status", "message": "What is the status of TASK-123?"},
]


def register(app: AsyncApp, worker: Worker) -> None:
    # its other events (deletions and edits included) it acknowledges itself: their jobs
    # are in the inbox already (bot.slack.app)
    assistant = AsyncAssistant()

    @assistant.thread_started
    async def suggest(set_suggested_prompts: AsyncSetSuggestedPrompts) -> None:
        await set_suggested_prompts(prompts=PROMPTS, title="Try one of these:")

    @assistant.user_message
    async def answer_in_pane(context: AsyncBoltContext) -> None:
        worker.acknowledged(context["question"])  # its ``pane`` is set already

    app.assistant(assistant)
