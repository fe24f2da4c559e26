"""Listeners, one module per kind of event. Each only acknowledges it (and puts the working
sign up): the rules (who is ignored, what was seen before) ran as middleware already, and
the job is in the inbox for the Worker."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.slack.listeners import actions, agent, changes, direct_messages, mentions
from bot.slack.worker import Worker


def register(app: AsyncApp, worker: Worker) -> None:
    for kind in (mentions, direct_messages, changes, actions, agent):
        kind.register(app, worker)
