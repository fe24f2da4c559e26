"""Whether a signed Slack request has the shape the bot's rules (bot.slack.events) and Bolt
read: a field of the wrong type or too long for the database is found here, before either
reads it, so the request is acknowledged and dropped instead of failing inside them. Pure,
no I/O."""

from __future__ import annotations

from typing import Any

from bot.slack.events import TS

#: the longest channel, user or event ID the database keeps (Slack's are about 11)
ID_CHARS = 64
#: a message event's fields the bot reads, and what each must be when present
_ID_FIELDS = ("type", "subtype", "channel", "channel_type", "user", "bot_id", "team")
_TS_FIELDS = ("ts", "thread_ts", "event_ts", "deleted_ts")
#: fields of any request that Bolt reads as an ID or an object holding one
_ENVELOPE_REFERENCES = ("team", "enterprise", "user", "channel", "container", "view")
_ACTION_IDS = ("action_id", "block_id", "type")


def malformed(body: dict[str, Any]) -> str | None:
    """Why a signed request cannot be one the bot handles (a field missing or of the
    wrong type; no value named), or None. Checked before Bolt reads the request: Bolt
    raises on an envelope field of the wrong type, and the rules above on a message's.
    Events other than messages and mentions are for Bolt's listeners."""
    if problem := _odd_envelope(body):
        return problem
    if body.get("type") != "event_callback":
        return None
    event, event_id = body.get("event"), body.get("event_id")
    if not isinstance(event, dict):
        return "an event_callback without an event"
    if event_id is not None and not _is_id(event_id):
        return "its event_id is not an ID"
    if not isinstance(event.get("type"), str):
        return "an event without a type"
    if event["type"] not in ("app_mention", "message"):
        return None
    if problem := _odd_fields(event, "event"):
        return problem
    for name in ("message", "previous_message"):  # an edit's or deletion's message
        inner = event.get(name)
        if inner is None:
            continue
        if not isinstance(inner, dict):
            return f"event.{name} is not a message"
        if problem := _odd_fields(inner, f"event.{name}"):
            return problem
    return None


def _odd_envelope(body: dict[str, Any]) -> str | None:
    """What Bolt reads of every request (who, where, which button) in the wrong shape."""
    for name in _ENVELOPE_REFERENCES:
        if body.get(name) is not None and not isinstance(body[name], str | dict):
            return f"{name} is neither an ID nor an object"
    if not _objects(body.get("authorizations"), optional=True):
        return "authorizations is not a list of objects"
    if body.get("type") in ("block_actions", "interactive_message"):
        actions = body.get("actions")
        if not (_objects(actions, optional=False) and actions):
            return "actions is not a list of actions"
        for action in actions:
            if any(action.get(k) is not None and not _is_id(action[k]) for k in _ACTION_IDS):
                return "an action's action_id, block_id or type is not an ID"
    return None


def _objects(value: object, *, optional: bool) -> bool:
    """A list of objects (or, if ``optional``, nothing)."""
    if value is None:
        return optional
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _odd_fields(message: dict[str, Any], where: str) -> str | None:
    for name in _ID_FIELDS:
        if message.get(name) is not None and not _is_id(message[name]):
            return f"{where}.{name} is not an ID"
    for name in _TS_FIELDS:
        value = message.get(name)
        if value is not None and not (isinstance(value, str) and TS.match(value)):
            return f"{where}.{name} is not a Slack timestamp"
    if "text" in message and not isinstance(message["text"], str):
        return f"{where}.text is not a string"
    return None


def _is_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= ID_CHARS
