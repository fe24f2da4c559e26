"""The model's Markdown -> safe Slack mrkdwn, split into postable messages. Pure, no I/O.

    format_answer(markdown) == split_message(to_mrkdwn(markdown))

`escape` makes model text inert, `mrkdwn` renders Markdown, `split` cuts long answers.
"""

from __future__ import annotations

from bot.slack.format.escape import ZWJ, ZWSP, escape, neutralise_mentions
from bot.slack.format.mrkdwn import to_mrkdwn
from bot.slack.format.split import DEFAULT_LIMIT, split_message

__all__ = [
    "DEFAULT_LIMIT",
    "ZWJ",
    "ZWSP",
    "escape",
    "format_answer",
    "neutralise_mentions",
    "split_message",
    "to_mrkdwn",
]


def format_answer(markdown: str) -> list[str]:
    """The model's Markdown as mrkdwn message texts (empty if there is nothing to say)."""
    return split_message(to_mrkdwn(markdown))
