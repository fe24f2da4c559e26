"""A press of one of the bot's buttons, from its ``block_actions`` request; no I/O."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeGuard

from bot.jobs import Job
from bot.messages import NEGATIVE, POSITIVE
from bot.slack.cards import FEEDBACK
from bot.slack.events import PRESS, TS, is_external

#: a turn id fits a BIGINT
TURN_ID_DIGITS = 18


@dataclass(frozen=True)
class Press:
    """A button of the bot's pressed: ``action`` on turn ``turn_id`` by ``user`` at
    ``action_ts``, in ``channel`` (in thread ``thread_ts``, if the press says so);
    ``verdict`` is a feedback button's (positive or negative). Where the press says the
    button was (its message) is not kept: only the card recorded for the turn is ever
    edited."""

    action: str
    turn_id: int
    user: str
    channel: str
    action_ts: str
    #: pressed by someone of another workspace (a shared channel)
    external: bool = False
    verdict: str | None = None
    thread_ts: str | None = None
    #: the presser's team (the stream of the answer that follows is for the asker there)
    team_id: str | None = None

    def job(self) -> Job:
        return Job(self.channel, self.action_ts, PRESS, dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Press:
        return cls(**data)


def press_from(
    body: dict[str, Any], action_ids: frozenset[str], home_team: str | None = None
) -> Press | None:
    """The press in a ``block_actions`` request of one of ``action_ids``, or None when a
    field is missing or not what Slack sends (the caller logs it). ``home_team``: the
    workspace the bot is installed in."""
    actions, container, user = body.get("actions"), body.get("container"), body.get("user")
    if not (isinstance(actions, list) and actions and isinstance(actions[0], dict)):
        return None
    if not (isinstance(container, dict) and isinstance(user, dict)):
        return None
    action = actions[0]
    action_id, value = action.get("action_id"), _text(action.get("value"))
    action_ts, thread_ts = action.get("action_ts"), container.get("thread_ts")
    user_id, channel = _text(user.get("id")), _text(container.get("channel_id"))
    if action_id not in action_ids or value is None or user_id is None or channel is None:
        return None
    if not (_ts(action_ts) and (thread_ts is None or _ts(thread_ts))):
        return None
    verdict, _, turn_id = value.rpartition(":") if action_id == FEEDBACK else ("", "", value)
    if action_id == FEEDBACK and verdict not in (POSITIVE, NEGATIVE):
        return None
    if not (turn_id.isascii() and turn_id.isdigit() and len(turn_id) <= TURN_ID_DIGITS):
        return None
    team = user.get("team_id") or (body.get("team") or {}).get("id")
    team_id = team if isinstance(team, str) and team else None
    external = is_external(user.get("team_id"), home_team)
    extra = (external, verdict or None, thread_ts, team_id)
    return Press(action_id, int(turn_id), user_id, channel, action_ts, *extra)


def _ts(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and TS.fullmatch(value) is not None


def _text(value: object) -> str | None:
    """``value`` if it is a string and not empty."""
    return value if isinstance(value, str) and value else None
