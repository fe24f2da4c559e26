"""The Slack app manifest asks for exactly the scopes and events the bot uses."""

from __future__ import annotations

import re
from pathlib import Path

MANIFEST = Path(__file__).resolve().parents[3] / "slack" / "manifest.yml"


def listed_under(text: str, key: str) -> set[str]:
    """The ``- item`` lines of the block that follows ``key:`` (this manifest's layout)."""
    block = re.search(rf"^(\s*){re.escape(key)}:\n((?:\1\s+(?:- .*|#.*)\n)+)", text, re.M)
    assert block, f"{key} not found"
    return set(re.findall(r"^\s*- (\S+)", block.group(2), re.M))


def test_the_manifest_asks_only_for_what_the_bot_uses() -> None:
    text = MANIFEST.read_text()

    assert listed_under(text, "bot") == {
        "app_mentions:read",
        "assistant:write",
        "channels:history",
        "channels:read",
        "chat:write",
        "groups:history",
        "groups:read",
        "im:history",
        "mpim:history",
        "reactions:write",
    }
    assert listed_under(text, "bot_events") == {
        "app_mention",
        "assistant_thread_started",
        # the workspace took the bot out: it stops posting there
        "app_uninstalled",
        "tokens_revoked",
        # a deleted channel is forgotten whole
        "channel_deleted",
        "group_deleted",
        # a mention's deletion or edit reaches the bot only through these
        "message.channels",
        "message.groups",
        "message.im",
        "message.mpim",
    }
    assert re.search(r"^  assistant_view:\n", text, re.M)
    assert re.search(r"^\s+socket_mode_enabled: true$", text, re.M)
    assert re.search(r"^\s+interactivity:\n\s+is_enabled: true$", text, re.M)
    assert not re.search(r"^\s+user:", text, re.M)  # no user-token scopes
