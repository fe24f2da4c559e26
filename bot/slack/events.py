"""Pure rules from a Slack event to what the bot does with it; no I/O.

``question_from`` says whether an event is a person asking the bot something (and what the
core gets), ``change_from`` whether it deletes or edits a message the stored history may
hold (which follows Slack). Everything else that is a message is ignored
and never stored: bots (the bot itself included), subtypes other than a plain message or
``file_share``, and channel messages that do not mention the bot.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from bot.agent.conversations import Incoming
from bot.jobs import Job
from bot.messages import Attachment, with_references

#: a person's message with an attachment still asks something; other subtypes never do
ANSWERED_SUBTYPES = frozenset({None, "file_share"})
#: the kinds of the bot's jobs (bot.jobs), and what each one's payload holds
QUESTION, CHANGE, PRESS = "question", "change", "press"
#: events that say a channel was deleted
CHANNEL_DELETIONS = frozenset({"channel_deleted", "group_deleted"})
#: files read of one message (Slack attaches at most 10)
MAX_FILES = 10
#: a Slack timestamp (seconds.microseconds)
TS = re.compile(r"^[0-9]{1,12}\.[0-9]{1,9}$")


@dataclass(frozen=True)
class Thread:
    """Where the bot posts: a channel, and a thread in it (None = the top level of a DM)."""

    channel: str
    thread_ts: str | None


@dataclass(frozen=True)
class Question:
    """A message the bot answers: what the core gets, and where the answer goes."""

    incoming: Incoming
    #: the thread to answer in; None = the top level of a DM
    thread_ts: str | None
    #: asked in the Slack AI assistant pane (its status line shows the steps)
    pane: bool = False
    #: asked by someone of another workspace (a shared channel): no write runs for them
    external: bool = False
    #: the asker's team (a stream in a channel is for them: recipient_team_id)
    team_id: str | None = None
    #: the files of the message (Slack's file objects, the fields ``file_refs`` keeps)
    files: tuple[dict[str, Any], ...] = ()
    #: a reply in a thread without a mention: a question only if the bot answered its
    #: author in that thread (known when its job runs, after what came before it)
    follow_up: bool = False

    @property
    def in_thread(self) -> bool:
        """Asked in a channel's thread (not at its top level, nor in a DM)."""
        return not self.channel.startswith("D") and self.thread_ts not in (None, self.ts)

    @property
    def channel(self) -> str:
        return self.incoming.channel_id

    @property
    def thread(self) -> Thread:
        return Thread(self.channel, self.thread_ts)

    @property
    def ts(self) -> str:
        return self.incoming.slack_ts or ""

    def to_dict(self) -> dict[str, Any]:
        """What the claim keeps, so that any process can answer it (see ``from_dict``)."""
        incoming = self.incoming
        return {
            "channel": incoming.channel_id,
            "ts": incoming.slack_ts,
            "text": incoming.text,
            "user": incoming.user_id,
            "thread_ts": self.thread_ts,
            "pane": self.pane,
            "external": self.external,
            "team": self.team_id,
            "files": list(self.files),
            "follow_up": self.follow_up,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Question:
        incoming = Incoming(data["channel"], data["text"], data["user"], data["ts"])
        external = bool(data.get("external"))  # a claim kept before there was the flag: no
        return cls(
            incoming,
            data["thread_ts"],
            pane=data["pane"],
            external=external,
            team_id=data.get("team"),
            files=tuple(data.get("files") or ()),  # none in a job queued by an older version
            follow_up=bool(data.get("follow_up")),
        )

    def job(self, event_id: str | None) -> Job:
        return Job(self.channel, self.ts, QUESTION, self.to_dict(), event_id)


def question_from(
    event: dict[str, Any],
    bot_user_id: str | None,
    home_team: str | None = None,
    follow_ups: bool = False,
    *,
    answer_all: bool = False,
) -> Question | None:
    """The question in an ``app_mention`` or ``message`` event, or None when it is ignored.
    ``home_team``: the workspace the bot is installed in (its askers are not external).
    ``follow_ups``: a reply in a channel's thread without a mention may be a question (a
    follow-up: see ``Question.follow_up``). ``answer_all``: the channel's setting: a
    top-level message there needs no mention."""
    kind = event.get("type")
    if kind not in ("app_mention", "message") or _from_a_bot(event, bot_user_id):
        return None
    if event.get("subtype") not in ANSWERED_SUBTYPES:
        return None
    channel, ts, user = event.get("channel"), event.get("ts"), event.get("user")
    text = event.get("text", "")  # a message of files alone may have none
    if not (channel and ts and user and isinstance(text, str)):
        return None
    in_dm = kind == "message" and event.get("channel_type") == "im"
    follow_up = False
    if not (in_dm or mentions(text, bot_user_id) or (answer_all and _top_level(event))):
        reply = event.get("thread_ts") not in (None, ts)
        if not (follow_ups and kind == "message" and reply):
            return None
        follow_up = True
    incoming = Incoming(channel, strip_mention(text, bot_user_id), user, ts)
    # in a channel the answer always goes in a thread; in a DM only when asked in one
    thread_ts = event.get("thread_ts") or (None if in_dm else ts)
    # a DM thread is one of the agent's threads (its title is set; known here, before the
    # claim keeps the question)
    pane = in_dm and event.get("thread_ts") is not None
    # Slack names the asker's own workspace in user_team (team in older events)
    team = event.get("user_team") or event.get("team")
    external = is_external(team, home_team)
    return Question(
        incoming,
        thread_ts,
        pane=pane,
        external=external,
        team_id=team or home_team,
        files=file_refs(event.get("files")),
        follow_up=follow_up,
    )


def unmentioned(event: dict[str, Any], bot_user_id: str | None) -> bool:
    """A person's message in a channel that does not mention the bot: a question only
    where the channel says so (``answer_all`` at the top level, ``follow_ups`` in a
    thread)."""
    text = event.get("text")
    return (
        event.get("type") == "message"
        and event.get("channel_type") != "im"
        and event.get("subtype") in ANSWERED_SUBTYPES
        and not _from_a_bot(event, bot_user_id)
        and not (isinstance(text, str) and mentions(text, bot_user_id))
    )


def _top_level(event: dict[str, Any]) -> bool:
    thread_ts = event.get("thread_ts")
    return thread_ts is None or thread_ts == event.get("ts")


def file_refs(files: Any) -> tuple[dict[str, Any], ...]:
    """What is kept of a message's files (Slack's file objects) until they are read: each
    one's id, name, type, size and private URL (none when Slack says to ask files.info)."""
    if not isinstance(files, list):
        return ()
    refs = []
    for file in files[:MAX_FILES]:
        if not isinstance(file, dict) or not isinstance(file.get("id"), str) or not file["id"]:
            continue
        size = file.get("size")
        url = file.get("url_private_download") or file.get("url_private")
        refs.append(
            {
                "id": file["id"],
                "name": str(file.get("name") or file.get("title") or file["id"])[:200],
                "mimetype": str(file.get("mimetype") or "application/octet-stream")[:100],
                "filetype": str(file.get("filetype") or "")[:50],
                "size": size if isinstance(size, int) and size >= 0 else None,
                "url": url if isinstance(url, str) else None,
            }
        )
    return tuple(refs)


@dataclass(frozen=True)
class Deletion:
    """A message deleted in Slack (``ts``), and when that happened (``event_ts``)."""

    channel: str
    ts: str
    event_ts: str

    def job(self, event_id: str | None) -> Job:
        return Job(self.channel, self.event_ts, CHANGE, dataclasses.asdict(self), event_id)


def deleted_message(event: dict[str, Any], bot_user_id: str | None) -> Deletion | None:
    """The message a ``message_deleted`` event removes, unless it was a bot's (the bot's
    own step messages come and go every turn; no bot's message is stored)."""
    if event.get("type") != "message" or event.get("subtype") != "message_deleted":
        return None
    before = event.get("previous_message")
    if isinstance(before, dict) and _from_a_bot(before, bot_user_id):
        return None
    channel, ts = event.get("channel"), event.get("deleted_ts")
    if not (channel and ts):
        return None
    return Deletion(channel, ts, event.get("event_ts") or event.get("ts") or ts)


@dataclass(frozen=True)
class Edit:
    """A person's message edited in Slack (``ts``): its new text, without the bot's mention,
    and when it was edited (``event_ts``)."""

    channel: str
    ts: str
    text: str
    event_ts: str

    def job(self, event_id: str | None) -> Job:
        return Job(self.channel, self.event_ts, CHANGE, dataclasses.asdict(self), event_id)


def edited_message(event: dict[str, Any], bot_user_id: str | None) -> Edit | None:
    """The message a ``message_changed`` event edits, when it may be stored: a person's,
    in a DM, mentioning the bot before or after, or a reply in a thread (a question's
    context may show it), and its text changed (Slack also sends ``message_changed`` when
    it adds a link's preview)."""
    if event.get("type") != "message" or event.get("subtype") != "message_changed":
        return None
    message, before = event.get("message"), event.get("previous_message") or {}
    if not isinstance(message, dict) or _from_a_bot(message, bot_user_id):
        return None
    channel, ts, text = event.get("channel"), message.get("ts"), message.get("text")
    if not (channel and ts and message.get("user") and isinstance(text, str)):
        return None
    old = before.get("text") if isinstance(before, dict) else None
    if text == old:
        return None
    asked = (
        event.get("channel_type") == "im"
        or message.get("thread_ts") not in (None, ts)
        or any(isinstance(t, str) and mentions(t, bot_user_id) for t in (text, old))
    )
    if not asked:
        return None
    event_ts = event.get("event_ts") or event.get("ts") or ts
    # the stored question keeps its files' references (Slack sends them with the edit)
    files = [_reference(ref) for ref in file_refs(message.get("files"))]
    return Edit(channel, ts, with_references(strip_mention(text, bot_user_id), files), event_ts)


@dataclass(frozen=True)
class ChannelGone:
    """A channel deleted in Slack (``channel_deleted``, ``group_deleted``): all the bot keeps
    of it goes. ``key``: its place in the channel's order, after what was sent before."""

    channel: str
    key: str

    def job(self, event_id: str | None) -> Job:
        return Job(self.channel, self.key, CHANGE, dataclasses.asdict(self), event_id)


def channel_gone(event: dict[str, Any], event_time: object = None) -> ChannelGone | None:
    """The channel a ``channel_deleted`` or ``group_deleted`` event removes. Slack sends no
    ts with them: the wrapper's ``event_time`` (whole seconds) places the job after every
    message of that second."""
    channel = event.get("channel")
    if event.get("type") not in CHANNEL_DELETIONS or not (isinstance(channel, str) and channel):
        return None
    key = event.get("event_ts")
    if not (isinstance(key, str) and TS.match(key)):
        if not isinstance(event_time, int) or isinstance(event_time, bool) or event_time < 0:
            return None
        key = f"{event_time}.999999"
    return ChannelGone(channel, key)


def change_from(
    event: dict[str, Any], bot_user_id: str | None, event_time: object = None
) -> Deletion | Edit | ChannelGone | None:
    """The deletion or the edit in a ``message`` event, if it is one the history follows, or
    the channel an event says was deleted (``event_time``: the wrapper's)."""
    return (
        deleted_message(event, bot_user_id)
        or edited_message(event, bot_user_id)
        or channel_gone(event, event_time)
    )


def change_of(payload: dict[str, Any]) -> Deletion | Edit | ChannelGone:
    """A change job's payload, back as the change."""
    if "text" in payload:
        return Edit(**payload)
    return Deletion(**payload) if "ts" in payload else ChannelGone(**payload)


def _reference(ref: dict[str, Any]) -> Attachment:
    """A file as the history refers to it (what ``file_refs`` kept), without its bytes."""
    return Attachment(ref["id"], ref["name"], ref["mimetype"], ref["size"] or 0)


def is_external(team: object, home_team: str | None) -> bool:
    """Whether ``team`` (a person's workspace, as the event names it) is another than the
    bot's: only when both are known."""
    return bool(home_team) and isinstance(team, str) and bool(team) and team != home_team


def understood(
    event: dict[str, Any],
    bot_user_id: str | None,
    home_team: str | None = None,
    event_time: object = None,
    follow_ups: bool = False,
) -> Question | Deletion | Edit | ChannelGone | None:
    """What the bot does with ``event``: answer its question (``question_from``), follow
    its change (``change_from``), or nothing (None)."""
    return question_from(event, bot_user_id, home_team, follow_ups) or change_from(
        event, bot_user_id, event_time
    )


def is_ignored(event: dict[str, Any], understood_as: object) -> bool:
    """A message event the bot neither answers nor stores (``understood`` found nothing)."""
    return event.get("type") in ("app_mention", "message") and understood_as is None


def mentions(text: str, bot_user_id: str | None) -> bool:
    return bool(bot_user_id and _mention_pattern(bot_user_id).search(text))


def strip_mention(text: str, bot_user_id: str | None) -> str:
    """The text without the bot's own ``<@UBOT>`` (or ``<@UBOT|name>``) mentions."""
    if not bot_user_id:
        return text.strip()
    stripped = _mention_pattern(bot_user_id).sub(" ", text)
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def _from_a_bot(event: dict[str, Any], bot_user_id: str | None) -> bool:
    return (
        bool(event.get("bot_id"))
        or event.get("subtype") == "bot_message"
        or (bot_user_id is not None and event.get("user") == bot_user_id)
    )


def _mention_pattern(bot_user_id: str) -> re.Pattern[str]:
    return re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>")
