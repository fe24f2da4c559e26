"""The approval rule alone (bot.agent.approval.decide): what becomes of a call before it
runs, from the tool's kind, the channel's settings, WRITE_APPROVAL and who asked."""

from __future__ import annotations

import pytest

from bot.agent.approval import APPROVAL, INTERRUPTION, NOT_FOR_GUESTS, decide
from bot.channels import ChannelSettings
from bot.messages import Decision

UNSET, ON, OFF = (
    ChannelSettings(),
    ChannelSettings(write_approval=True),
    ChannelSettings(write_approval=False),
)


@pytest.mark.parametrize(
    ("channel", "write_approval", "decided"),
    [
        (UNSET, True, INTERRUPTION),  # WRITE_APPROVAL holds where the channel says nothing
        (UNSET, False, APPROVAL),
        (ON, False, INTERRUPTION),  # the channel's own outweighs it, either way
        (OFF, True, APPROVAL),
        (ON, True, INTERRUPTION),
        (OFF, False, APPROVAL),
    ],
)
def test_a_write_waits_where_approval_is_on(
    channel: ChannelSettings, write_approval: bool, decided: Decision
) -> None:
    assert decide(True, channel, write_approval, external=False) == decided


@pytest.mark.parametrize("channel", [UNSET, ON, OFF])
@pytest.mark.parametrize("write_approval", [True, False])
def test_a_read_runs_and_a_guests_write_is_refused_whatever_the_settings(
    channel: ChannelSettings, write_approval: bool
) -> None:
    assert decide(False, channel, write_approval, external=False) == APPROVAL
    assert decide(False, channel, write_approval, external=True) == APPROVAL
    refused = decide(True, channel, write_approval, external=True)
    assert refused.action == "reject" and refused.reason == NOT_FOR_GUESTS
