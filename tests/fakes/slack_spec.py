"""The Slack Web API methods the fake Slack serves, each with the arguments Slack takes for it
and the scopes that let a bot call it, as Slack publishes them.

Written from Slack's OpenAPI spec of the Web API, slackapi/slack-api-specs
``web-api/slack_web_openapi_v2.json`` at commit bc08db49625630e3585bf2f1322128ea04f2a7f3
(spec version 1.7.0, the repository's last change, 2021-09-03). The spec is older than some
methods and arguments: those (``docs`` in the table) are from Slack's method reference at
docs.slack.dev/reference/methods: message metadata, ``markdown_text``, ``include_all_metadata``,
the methods of Socket Mode, of the agent view (assistant.threads.*), of streaming
(chat.startStream, chat.appendStream, chat.stopStream) and of uploads
(files.getUploadURLExternal, files.completeUploadExternal).

The spec names the scopes of chat.* by the classic apps' ``chat:write:bot``; a bot token's
is ``chat:write`` (docs). A conversations.* method takes one scope per kind of conversation
(public or private channel, DM, group DM): any one lets the bot call it there.

These are the methods the bot calls (tests/scenarios/slack/test_manifest.py checks that the
manifest asks for their scopes), and users.info, which the fake also serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Method:
    """A Web API method: the arguments Slack takes besides ``token``, those of them newer
    than the spec, and the scopes any one of which lets a token call it."""

    arguments: frozenset[str]
    scopes: frozenset[str]
    newer: frozenset[str]
    #: whether the spec has the method (else all of it is from the docs)
    in_spec: bool = True
    #: a bot token, or the app-level token (Socket Mode)
    token: Literal["bot", "app"] = "bot"


def _from_spec(arguments: str, scopes: str, *, docs: str = "") -> Method:
    """A method of the spec; ``docs``: its arguments added since."""
    newer = frozenset(docs.split())
    return Method(frozenset(arguments.split()) | newer, frozenset(scopes.split()), newer)


def _from_docs(arguments: str, scopes: str, *, token: Literal["bot", "app"] = "bot") -> Method:
    """A method newer than the spec."""
    every = frozenset(arguments.split())
    return Method(every, frozenset(scopes.split()), every, in_spec=False, token=token)


#: the arguments of a message a bot may post as someone else would (name and icon)
_AUTHORSHIP = "icon_emoji icon_url username"

METHODS: dict[str, Method] = {
    "auth.test": _from_spec("", ""),
    "apps.connections.open": _from_docs("", "connections:write", token="app"),
    "chat.postMessage": _from_spec(
        f"as_user attachments blocks channel link_names mrkdwn parse reply_broadcast text "
        f"thread_ts unfurl_links unfurl_media {_AUTHORSHIP}",
        "chat:write",
        docs="metadata markdown_text current_draft_last_updated_ts",
    ),
    "chat.update": _from_spec(
        "as_user attachments blocks channel link_names parse text ts",
        "chat:write",
        docs="metadata markdown_text file_ids reply_broadcast unfurled_attachments",
    ),
    "chat.delete": _from_spec("as_user channel ts", "chat:write"),
    "chat.postEphemeral": _from_spec(
        f"as_user attachments blocks channel link_names parse text thread_ts user {_AUTHORSHIP}",
        "chat:write",
        docs="markdown_text",
    ),
    "chat.startStream": _from_docs(
        "channel thread_ts markdown_text chunks recipient_user_id recipient_team_id "
        f"task_display_mode {_AUTHORSHIP}",
        "chat:write",
    ),
    "chat.appendStream": _from_docs("channel ts markdown_text chunks", "chat:write"),
    "chat.stopStream": _from_docs(
        "channel ts markdown_text blocks metadata chunks session_status", "chat:write"
    ),
    "reactions.add": _from_spec("channel name timestamp", "reactions:write"),
    "reactions.remove": _from_spec("channel file file_comment name timestamp", "reactions:write"),
    "conversations.info": _from_spec(
        "channel include_locale include_num_members",
        "channels:read groups:read im:read mpim:read",
    ),
    "conversations.history": _from_spec(
        "channel cursor inclusive latest limit oldest",
        "channels:history groups:history im:history mpim:history",
        docs="include_all_metadata",
    ),
    "conversations.replies": _from_spec(
        "channel cursor inclusive latest limit oldest ts",
        "channels:history groups:history im:history mpim:history",
        docs="include_all_metadata",
    ),
    "users.info": _from_spec("include_locale user", "users:read"),
    "files.info": _from_spec("count cursor file limit page", "files:read"),
    # the two Web API steps of an upload (files_upload_v2); the bytes go to the URL between
    "files.getUploadURLExternal": _from_docs("filename length alt_txt snippet_type", "files:write"),
    "files.completeUploadExternal": _from_docs(
        "files channel_id channels initial_comment thread_ts blocks", "files:write"
    ),
    # the docs accept chat:write as well, and say it will be the only one
    "assistant.threads.setStatus": _from_docs(
        f"channel_id thread_ts status loading_messages {_AUTHORSHIP}",
        "assistant:write chat:write",
    ),
    "assistant.threads.setSuggestedPrompts": _from_docs(
        "channel_id prompts thread_ts title", "assistant:write"
    ),
    "assistant.threads.setTitle": _from_docs("channel_id thread_ts title", "assistant:write"),
}


def unknown_arguments(method: str, arguments: set[str]) -> list[str]:
    """The ``arguments`` Slack does not take for ``method``, in order."""
    return sorted(arguments - METHODS[method].arguments)
