"""Which calls wait for a person: the one rule, evaluated by the loop before a round's calls
run (bot.agent.loop). A call the rule interrupts pauses the turn (``awaiting_approval``);
the turn's result carries it among its interruptions, and the shell that asked collects a
decision on each (a card in Slack, the prompt of ``bot chat``, ``--approve`` of ``bot
ask``) and gives them to ``Conversations.resume``."""

from __future__ import annotations

from bot.channels import ChannelSettings
from bot.messages import Decision

APPROVAL = Decision("approve")
INTERRUPTION = Decision("interrupt")
#: the result of a write asked for by someone of another workspace (what the model reads)
NOT_FOR_GUESTS = (
    "Not done: this bot makes changes only for people of its own Slack workspace, and this "
    "request came from someone of another workspace (a shared channel). Someone of the "
    "bot's workspace can ask for it."
)
REFUSED_FOR_A_GUEST = Decision.reject(NOT_FOR_GUESTS)


def decide(
    writes: bool, channel: ChannelSettings, write_approval: bool, external: bool
) -> Decision:
    """What becomes of a call before it runs: a read runs; a write asked for by someone of
    another workspace (``external``) is refused; any other write waits for the asker's
    approval (an interruption) where approval is on (the channel's ``write_approval``, else
    ``write_approval``: WRITE_APPROVAL), and runs where it is off."""
    if not writes:
        return APPROVAL
    if external:
        return REFUSED_FOR_A_GUEST
    return INTERRUPTION if channel.approval(write_approval) else APPROVAL
