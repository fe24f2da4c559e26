"""The fake Slack's Web API methods (chat.*, reactions.*, conversations.*, users.info,
assistant.threads.*), as strict as Slack; they are called with the fake's lock held."""

from __future__ import annotations

import base64
from collections import defaultdict
from typing import Any

from tests.fakes.slack_content import check_blocks, check_content, check_metadata
from tests.fakes.slack_requests import SlackError

FIRST_TS_SECONDS = 1_700_000_000


class WebMethods:
    """Mixed into FakeSlack, whose state they read and change."""

    bot_user_id: str
    bot_id: str
    team_id: str
    team_name: str
    app_id: str
    known_channels: set[str]
    channel_names: dict[str, str]
    users: dict[str, dict[str, Any]]
    _messages: defaultdict[str, list[dict[str, Any]]]
    _ephemeral: list[dict[str, Any]]
    _reactions: defaultdict[tuple[str, str], list[str]]
    _status: dict[tuple[str, str], str]
    _prompts: dict[tuple[str, str], list[dict[str, Any]]]
    _titles: dict[tuple[str, str], str]
    _ts_counter: int

    def _next_ts(self) -> str:
        self._ts_counter += 1
        micros = self._ts_counter * 100
        return f"{FIRST_TS_SECONDS + micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _channel_exists(self, channel: str) -> bool:
        return not self.known_channels or channel in self.known_channels

    def _require_channel(self, args: dict[str, Any], key: str = "channel") -> str:
        channel = args.get(key)
        if not channel or not isinstance(channel, str) or not self._channel_exists(channel):
            raise SlackError("channel_not_found")
        return channel

    def _find(self, channel: str, ts: Any) -> dict[str, Any]:
        for message in self._messages.get(channel, []):
            if message["ts"] == ts:
                return message
        raise SlackError("message_not_found")

    def _public(self, channel: str, message: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in message.items() if not k.startswith("_")}
        out["channel"] = channel
        out["reactions"] = list(self._reactions.get((channel, message["ts"]), []))
        return out

    def _bot_message(self, args: dict[str, Any], ts: str) -> dict[str, Any]:
        return {
            "type": "message",
            "ts": ts,
            "text": args.get("text", ""),
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "team": self.team_id,
            "thread_ts": args.get("thread_ts") or None,
            "blocks": args.get("blocks"),
            "metadata": args.get("metadata"),
        }

    def _message_response(self, message: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in message.items() if v is not None and not k.startswith("_")}

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake-workspace.slack.com/",
            "team": self.team_name,
            "user": "bot",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _check_blocks_and_metadata(self, args: dict[str, Any]) -> None:
        if "blocks" in args:
            check_blocks(args["blocks"])
        check_metadata(args)

    def _new_message(self, channel: str, args: dict[str, Any]) -> dict[str, Any]:
        message = self._bot_message(args, self._next_ts())
        self._messages[channel].append(message)
        return message

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        check_content(args, required=True)
        check_metadata(args)
        message = self._new_message(channel, args)
        return {"channel": channel, "ts": message["ts"], "message": self._message_response(message)}

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        message = self._find(channel, args.get("ts"))
        if message.get("user") != self.bot_user_id:
            raise SlackError("cant_update_message")
        if message.get("_streaming"):
            raise SlackError("cant_update_message", "the message is still streaming")
        check_content(args, required=True)
        check_metadata(args)
        if "text" in args:
            message["text"] = args["text"]
        if "blocks" in args:
            message["blocks"] = args["blocks"]
        if "metadata" in args:
            message["metadata"] = args["metadata"]
        message["edited"] = {"user": self.bot_user_id, "ts": self._next_ts()}
        return {
            "channel": channel,
            "ts": message["ts"],
            "text": message["text"],
            "message": self._message_response(message),
        }

    def _delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        message = self._find(channel, args.get("ts"))
        if message.get("user") != self.bot_user_id:
            raise SlackError("cant_delete_message")
        self._messages[channel].remove(message)
        return {"channel": channel, "ts": message["ts"]}

    def _post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)
        user = args.get("user")
        if not user or not isinstance(user, str):
            raise SlackError("user_not_in_channel")
        check_content(args, required=True)
        ts = self._next_ts()
        self._ephemeral.append(
            {
                "channel": channel,
                "user": user,
                "ts": ts,
                "text": args.get("text", ""),
                "blocks": args.get("blocks"),
                "thread_ts": args.get("thread_ts") or None,
            }
        )
        return {"message_ts": ts}

    def _reaction_target(self, args: dict[str, Any]) -> tuple[tuple[str, str], str]:
        if not args.get("channel") or not args.get("timestamp"):
            raise SlackError("no_item_specified")
        channel = self._require_channel(args)
        name = args.get("name")
        if not name or not isinstance(name, str) or ":" in name or " " in name:
            raise SlackError("invalid_name")
        return (channel, str(args["timestamp"])), name

    def _reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        key, name = self._reaction_target(args)
        if name in self._reactions[key]:
            raise SlackError("already_reacted")
        self._reactions[key].append(name)
        return {}

    def _reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        key, name = self._reaction_target(args)
        if name not in self._reactions.get(key, []):
            raise SlackError("no_reaction")
        self._reactions[key].remove(name)
        return {}

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        if not channel or not isinstance(channel, str):
            raise SlackError("channel_not_found")
        if not self._channel_exists(channel) and channel not in self.channel_names:
            raise SlackError("channel_not_found")
        is_im = channel.startswith("D")
        info: dict[str, Any] = {
            "id": channel,
            "created": FIRST_TS_SECONDS - 86_400,
            "is_channel": channel.startswith("C"),
            "is_group": channel.startswith("G"),
            "is_im": is_im,
            "is_mpim": False,
            "is_private": not channel.startswith("C"),
            "is_archived": False,
            "is_general": False,
            "is_member": True,
            "context_team_id": self.team_id,
        }
        if is_im:
            info["user"] = "U1"
        else:
            name = self.channel_names.get(channel, "general")
            info.update(
                {
                    "name": name,
                    "name_normalized": name,
                    "is_general": name == "general",
                    "topic": {"value": "", "creator": "", "last_set": 0},
                    "purpose": {"value": "", "creator": "", "last_set": 0},
                }
            )
        return {"channel": info}

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages (thread parents included), newest first; after ``oldest``."""
        channel = self._require_channel(args)
        oldest = ts_key(str(args.get("oldest") or "0"))
        found = [
            m
            for m in self._messages.get(channel, [])
            if m["thread_ts"] in (None, m["ts"]) and ts_key(m["ts"]) > oldest
        ]
        found.sort(key=lambda m: ts_key(m["ts"]), reverse=True)
        return self._listing(found, args, default_limit=100, max_limit=999)

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent (if the fake has seen it) and its replies, oldest first."""
        channel = self._require_channel(args)
        ts = args.get("ts")
        if not ts or not isinstance(ts, str):
            raise SlackError("invalid_arguments", "missing required field: ts")
        found = [m for m in self._messages.get(channel, []) if ts in (m["ts"], m["thread_ts"])]
        if not found:
            raise SlackError("thread_not_found")
        found.sort(key=lambda m: ts_key(m["ts"]))
        return self._listing(found, args, default_limit=1000, max_limit=1000)

    def _listing(
        self,
        messages: list[dict[str, Any]],
        args: dict[str, Any],
        *,
        default_limit: int,
        max_limit: int,
    ) -> dict[str, Any]:
        """One page of ``messages`` as conversations.* lists them: by ``limit`` and
        ``cursor``, with metadata only when ``include_all_metadata`` is set."""
        try:
            limit = int(args.get("limit") or default_limit)
        except (TypeError, ValueError):
            limit = 0
        if limit < 1:
            raise SlackError("invalid_limit")
        start = cursor_offset(args.get("cursor"))
        page = messages[start : start + min(limit, max_limit)]
        with_metadata = flag(args.get("include_all_metadata"))
        listed = []
        for message in page:
            shown = self._message_response(message)
            if not with_metadata:
                shown.pop("metadata", None)
            listed.append(shown)
        more = start + len(page) < len(messages)
        next_cursor = cursor(start + len(page)) if more else ""
        return {
            "messages": listed,
            "has_more": more,
            "response_metadata": {"next_cursor": next_cursor},
        }

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = args.get("user")
        if not user or not isinstance(user, str) or user[0] not in "UWB":
            raise SlackError("user_not_found")
        is_bot = user == self.bot_user_id
        name = "bot" if is_bot else user.lower()
        real_name = "Bot" if is_bot else f"User {user}"
        info: dict[str, Any] = {
            "id": user,
            "team_id": self.team_id,
            "name": name,
            "real_name": real_name,
            "deleted": False,
            "is_bot": is_bot,
            "is_admin": False,
            "tz": "Europe/London",
            "tz_offset": 0,
        }
        info.update(self.users.get(user, {}))
        info["profile"] = {
            "real_name": info["real_name"],
            "display_name": info.get("display_name", info["name"]),
            "email": info.get("email", f"{info['name']}@example.com"),
            **info.get("profile", {}),
        }
        return {"user": info}

    def _assistant_thread(self, args: dict[str, Any]) -> tuple[str, str]:
        channel = self._require_channel(args, "channel_id")
        thread_ts = args.get("thread_ts")
        if not thread_ts or not isinstance(thread_ts, str):
            raise SlackError("invalid_arguments", "missing required field: thread_ts")
        return channel, thread_ts

    def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        key = self._assistant_thread(args)
        status = args.get("status")
        if not isinstance(status, str):
            raise SlackError("invalid_arguments", "missing required field: status")
        self._status[key] = status
        return {}

    def _set_suggested_prompts(self, args: dict[str, Any]) -> dict[str, Any]:
        # without thread_ts: pinned at the top of the app's DM (the agent view), key (channel, "")
        if args.get("thread_ts") is None:
            key = (self._require_channel(args, "channel_id"), "")
        else:
            key = self._assistant_thread(args)
        prompts = args.get("prompts")
        if not isinstance(prompts, list) or not prompts or len(prompts) > 4:
            raise SlackError("invalid_arguments", "prompts must be a list of 1 to 4 prompts")
        for prompt in prompts:
            if not isinstance(prompt, dict) or not prompt.get("title") or not prompt.get("message"):
                raise SlackError("invalid_arguments", "each prompt needs a title and a message")
        self._prompts[key] = prompts
        return {}

    def _set_title(self, args: dict[str, Any]) -> dict[str, Any]:
        key = self._assistant_thread(args)
        title = args.get("title")
        if not title or not isinstance(title, str):
            raise SlackError("invalid_arguments", "missing required field: title")
        self._titles[key] = title
        return {}


def flag(value: Any) -> bool:
    """A boolean argument as Slack reads it: true, "true" or "1"."""
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def cursor(offset: int) -> str:
    return base64.b64encode(f"offset:{offset}".encode()).decode()


def cursor_offset(cursor: Any) -> int:
    """Where a page starts: 0 without a cursor; ``invalid_cursor`` for one not handed out."""
    if not cursor:
        return 0
    try:
        kind, _, offset = base64.b64decode(str(cursor), validate=True).decode().partition(":")
        if kind == "offset" and offset.isdigit():
            return int(offset)
    except ValueError:
        pass
    raise SlackError("invalid_cursor")


def ts_key(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    try:
        return int(seconds), int(fraction.ljust(6, "0")[:6] or 0)
    except ValueError:
        return 0, 0
