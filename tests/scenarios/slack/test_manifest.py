"""The Slack app manifest asks for exactly the scopes and events the bot uses: the scopes are
those of the Web API methods the code calls and of the events it subscribes to."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fakes.slack_spec import METHODS

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "slack" / "manifest.yml"

_HISTORY = {"channels:history", "groups:history", "im:history", "mpim:history"}
#: the bot token scopes each Web API method needs (docs.slack.dev/reference/methods)
METHOD_SCOPES: dict[str, set[str]] = {
    "auth.test": set(),
    # Socket Mode, with the app-level token (connections:write): no bot scope
    "apps.connections.open": set(),
    # the Socket Mode client's acknowledgement of an envelope, on the websocket: no scope
    "send.socket.mode.response": set(),
    "chat.postMessage": {"chat:write"},
    "chat.postEphemeral": {"chat:write"},
    "chat.update": {"chat:write"},
    "chat.delete": {"chat:write"},
    "chat.startStream": {"chat:write"},
    "chat.appendStream": {"chat:write"},
    "chat.stopStream": {"chat:write"},
    "reactions.add": {"reactions:write"},
    "reactions.remove": {"reactions:write"},
    # a channel's, a private channel's or a group DM's name (a DM's is never asked: im:read)
    "conversations.info": {"channels:read", "groups:read", "mpim:read"},
    "conversations.history": _HISTORY,
    "conversations.replies": _HISTORY,
    "assistant.threads.setStatus": {"assistant:write"},
    "assistant.threads.setTitle": {"assistant:write"},
    "assistant.threads.setSuggestedPrompts": {"assistant:write"},
    # a file Slack Connect gave without its URL
    "files.info": {"files:read"},
    # a long answer attached as a file (files_upload_v2)
    "files.getUploadURLExternal": {"files:write"},
    "files.completeUploadExternal": {"files:write"},
    # the display names of the people of a thread around a question
    "users.info": {"users:read"},
}
#: slack_sdk helpers and the methods they call
HELPERS = {
    "chat.stream": {"chat.startStream", "chat.appendStream", "chat.stopStream"},
    "files.upload.v2": {"files.getUploadURLExternal", "files.completeUploadExternal"},
}
EVENT_SCOPES: dict[str, set[str]] = {
    "app_home_opened": set(),
    "app_mention": {"app_mentions:read"},
    # the workspace took the bot out: it stops posting there
    "app_uninstalled": set(),
    "tokens_revoked": set(),
    # a deleted channel is forgotten whole
    "channel_deleted": {"channels:read"},
    "group_deleted": {"groups:read"},
    "message.channels": {"channels:history"},
    "message.groups": {"groups:history"},
    "message.im": {"im:history"},
    "message.mpim": {"mpim:history"},
}
#: used with the token outside the Web API's methods: the files attached to a question are
#: downloaded from their url_private
FILE_DOWNLOADS = {"files:read"}
#: what a method gives only with a scope of its own: users.info's profile.email (who asked
#: a Jira write; a Slack mention matched to a Jira user)
FIELD_SCOPES = {"users:read.email"}


def listed_under(text: str, key: str) -> set[str]:
    """The ``- item`` lines of the block that follows ``key:`` (this manifest's layout)."""
    block = re.search(rf"^(\s*){re.escape(key)}:\n((?:\1\s+(?:- .*|#.*)\n)+)", text, re.M)
    assert block, f"{key} not found"
    return set(re.findall(r"^\s*- (\S+)", block.group(2), re.M))


def methods_called() -> set[str]:
    """The Web API methods the Slack shell calls through its client (``client.chat_update(``
    is chat.update)."""
    found = set()
    for path in (ROOT / "bot" / "slack").rglob("*.py"):
        for name in re.findall(r"\bclient\.([a-z]+(?:_[A-Za-z0-9]+)+)\(", path.read_text()):
            method = name.replace("_", ".")
            found |= HELPERS.get(method, {method})
    return found


def test_every_method_the_bot_calls_is_known_here() -> None:
    called = methods_called()
    assert called - METHOD_SCOPES.keys() == set(), "a new method: add its scopes above"
    assert {"chat.startStream", "conversations.info", "assistant.threads.setStatus"} <= called


def test_each_method_is_asked_a_scope_slack_gives_it() -> None:
    # the scopes here are those the bot needs; Slack's table (the fake's) those that let it in
    for method in methods_called() - {"send.socket.mode.response"}:  # a websocket message
        published, asked = METHODS[method], METHOD_SCOPES[method]
        assert asked <= published.scopes, method
        needs_one = published.token == "bot" and bool(published.scopes)
        assert bool(asked) == needs_one, method


def test_the_manifest_asks_only_for_what_the_bot_uses() -> None:
    text = MANIFEST.read_text()
    events = listed_under(text, "bot_events")
    assert events == set(EVENT_SCOPES)

    needed = set().union(*(METHOD_SCOPES[m] for m in methods_called()))
    needed |= set().union(*(EVENT_SCOPES[e] for e in events)) | FILE_DOWNLOADS | FIELD_SCOPES
    assert listed_under(text, "bot") == needed
    assert "mpim:read" in needed  # conversations.info on a group DM


def test_the_manifest_is_an_agent_of_the_current_kind() -> None:
    text = MANIFEST.read_text()
    # the agent view (the Messages tab) is what new apps get; assistant_view is the old one
    assert re.search(r"^  agent_view:\n    agent_description: \S", text, re.M)
    assert "assistant_view" not in text and "assistant_thread_started" not in text
    assert re.search(r"^    messages_tab_enabled: true$", text, re.M)
    assert re.search(r"^\s+socket_mode_enabled: true$", text, re.M)
    assert re.search(r"^\s+interactivity:\n\s+is_enabled: true$", text, re.M)
    assert not re.search(r"^\s+user:", text, re.M)  # no user-token scopes
