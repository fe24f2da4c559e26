"""Listeners, one module per kind of event. Each only hands the work to the TurnRunner: the
rules (who is ignored, what was seen before) ran as middleware already."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.slack.listeners import actions, assistant, changes, direct_messages, mentions
from bot.slack.turns import TurnRunner


def register(app: AsyncApp, runner: TurnRunner) -> None:
    for kind in (mentions, direct_messages, changes, actions, assistant):
        kind.register(app, runner)
