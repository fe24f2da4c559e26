"""Neutral values shared by the loop, the model adapters and storage.

``Message.to_dict`` / ``from_dict`` are the history JSON of docs/interface.md: a key that
does not apply is absent, except ``content`` of an assistant message that only calls
tools, which is null.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from bot.context import Context

Role = Literal["user", "assistant", "tool"]


class Outcome(StrEnum):
    """Where a turn stands. A StrEnum: stored, compared and shown as its plain text.

    running --> answered | truncated | error     (its answer, or why there is none)
    running --> max_rounds          (answered at the round cap; a person may continue)
    running --> awaiting_approval   (a write waits for a person) --> running | expired
    running --> interrupted         (its process died and nobody resumed it)
    """

    RUNNING = "running"
    ANSWERED = "answered"
    MAX_ROUNDS = "max_rounds"
    ERROR = "error"
    TRUNCATED = "truncated"
    INTERRUPTED = "interrupted"
    AWAITING_APPROVAL = "awaiting_approval"
    EXPIRED = "expired"

    @property
    def stopped(self) -> bool:
        """Stopped for a person, who may let it go on (approve, or Continue past the cap)."""
        return self in _STOPPED

    @property
    def answered(self) -> bool:
        """It ended with an answer (cut off, or at the round cap, included)."""
        return self in _ANSWERED

    @property
    def final(self) -> bool:
        """It ended with an answer and nothing is left to do (its answer takes feedback)."""
        return self in _FINAL

    @property
    def failed(self) -> bool:
        """It ended without an answer for a fault (the model's, the database's, a crash)."""
        return self in _FAILED


_STOPPED = frozenset({Outcome.AWAITING_APPROVAL, Outcome.MAX_ROUNDS})
_ANSWERED = frozenset({Outcome.ANSWERED, Outcome.TRUNCATED, Outcome.MAX_ROUNDS})
_FINAL = frozenset({Outcome.ANSWERED, Outcome.TRUNCATED})
_FAILED = frozenset({Outcome.ERROR, Outcome.INTERRUPTED})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for; ``arguments`` is the JSON text exactly as sent.

    ``marker`` is the idempotency marker a call of a writing tool carries (a Jira label):
    given before the call runs and stored with it, so that whoever resumes the turn can
    look up whether the write happened instead of sending it again. ``preview`` is the
    change a writing call would make, in words a person can check before approving it
    ("Assign TASK-12 to Carol Diaz"), read when its turn pauses for approval. Neither is
    part of the history documents (``to_dict``); ``to_stored`` / ``from_dict`` keep them.
    """

    id: str
    name: str
    arguments: str
    marker: str | None = None
    preview: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    def to_stored(self) -> dict[str, Any]:
        data = self.to_dict()
        if self.marker is not None:
            data["marker"] = self.marker
        if self.preview is not None:
            data["preview"] = self.preview
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(
            id=data["id"],
            name=data["name"],
            arguments=data.get("arguments") or "",
            marker=data.get("marker"),
            preview=data.get("preview"),
        )


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a person's message, as the model gets it in that turn alone:
    an image (``image``: its bytes, of type ``mimetype``), or ``text`` for the model (a text
    file's contents, or a note saying why the file was not read). The history keeps only
    its ``reference``, never its bytes."""

    file_id: str
    name: str
    mimetype: str
    size: int
    image: bytes | None = None
    text: str | None = None

    @property
    def reference(self) -> str:
        kind = f"{self.mimetype}, {self.size:,} bytes, id {self.file_id}"
        return f"[attached file {self.name!r}: {kind}]"


def with_references(text: str, attachments: Sequence[Attachment]) -> str:
    """A person's message as it is stored: its text, then a reference to each file."""
    references = [a.reference for a in attachments]
    return "\n".join([text, *references] if text else references)


# speed device: see bench/README.md, "Message not frozen"
@dataclass(slots=True)
class Message:
    """One stored or in-flight message, in the same form for both API modes. Treat it as
    immutable (``with_`` makes a changed copy). Not frozen: a window read from the database
    builds a few hundred, and a frozen dataclass costs several times as much to build."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    user_id: str | None = None
    slack_ts: str | None = None
    id: int | None = None
    turn_id: int | None = None
    created_at: datetime | None = None
    #: estimated token count, set when stored; lets the window avoid re-counting
    tokens: int = 0
    #: when a person last edited it where it was asked (a user message only)
    edited_at: datetime | None = None
    #: an assistant message's items as the API gave them, to send back as they are within
    #: the turn (the Responses API's reasoning items, with their encrypted content, and the
    #: items they preceded); opaque, never stored, not part of the documents
    replay: tuple[dict[str, Any], ...] = ()
    #: the files of a person's message, for the turn that answers it (never stored)
    attachments: tuple[Attachment, ...] = ()
    #: a person's question: the thread's messages its ``content`` shows before the question,
    #: and the question alone (``asked``), kept so that the content follows Slack's changes
    context: Context | None = None
    asked: str | None = None

    @classmethod
    def user(cls, text: str, *, user_id: str | None = None, slack_ts: str | None = None) -> Message:
        return cls(role="user", content=text, user_id=user_id, slack_ts=slack_ts)

    @classmethod
    def assistant(
        cls,
        text: str | None,
        tool_calls: tuple[ToolCall, ...] = (),
        replay: tuple[dict[str, Any], ...] = (),
    ) -> Message:
        return cls(role="assistant", content=text, tool_calls=tuple(tool_calls), replay=replay)

    @classmethod
    def tool_result(cls, call: ToolCall, content: str) -> Message:
        return cls(role="tool", content=content, tool_call_id=call.id, name=call.name)

    def with_(self, **changes: Any) -> Message:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.id is not None:
            data["id"] = self.id
        data["role"] = self.role
        if self.content is not None or (self.role == "assistant" and self.tool_calls):
            data["content"] = self.content
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.user_id is not None:
            data["user_id"] = self.user_id
        if self.slack_ts is not None:
            data["slack_ts"] = self.slack_ts
        if self.turn_id is not None:
            data["turn_id"] = self.turn_id
        if self.created_at is not None:
            data["created_at"] = iso(self.created_at)
        if self.edited_at is not None:
            data["edited_at"] = iso(self.edited_at)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        created, edited = data.get("created_at"), data.get("edited_at")
        return cls(
            role=data["role"],
            content=data.get("content"),
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            user_id=data.get("user_id"),
            slack_ts=data.get("slack_ts"),
            id=data.get("id"),
            turn_id=data.get("turn_id"),
            created_at=parse_iso(created) if created else None,
            edited_at=parse_iso(edited) if edited else None,
        )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about one tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One answer of the model: text, tool calls or both.

    ``finish`` is ``"stop"``, ``"tool_calls"``, ``"length"`` (cut off) or ``"content_filter"``;
    ``replay``: what the adapter needs sent back as it was (see ``Message.replay``).
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish: str = "stop"
    replay: tuple[dict[str, Any], ...] = ()


#: how journals written before the actions had these names spell them
_OLD_ACTIONS = {"run": "approve", "decline": "reject", "pause": "interrupt"}


@dataclass(frozen=True, slots=True)
class Decision:
    """What becomes of a call of a writing tool: its approval (it runs), its rejection (the
    reason is the call's result), or an interruption (the turn pauses until a person
    decides; the call is one of the turn's interruptions)."""

    action: Literal["approve", "reject", "interrupt"]
    reason: str = ""

    @classmethod
    def reject(cls, reason: str) -> Decision:
        return cls("reject", reason)

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        action = data["action"]
        return cls(_OLD_ACTIONS.get(action, action), data.get("reason") or "")


#: the verdicts a person can give an answer
POSITIVE, NEGATIVE = "positive", "negative"


@dataclass(frozen=True, slots=True)
class Feedback:
    """One person's verdict on a turn's answer: ``positive`` or ``negative``, given ``at``."""

    user_id: str
    value: str
    at: datetime


@dataclass(frozen=True)
class SessionSummary:
    """One stored session (a channel) as the sessions list shows it."""

    channel_id: str
    name: str | None
    messages: int
    turns: int
    last_activity: datetime | None
    #: feedback given on the session's answers: verdicts of each kind
    positive: int = 0
    negative: int = 0


@dataclass(frozen=True)
class Summary:
    """The model's summary of a channel's stored messages from ``first_message_id`` to
    ``last_message_id``, those that fell out of its window (the previous summary included)."""

    channel_id: str
    text: str
    first_message_id: int
    last_message_id: int
    tokens: int
    created_at: datetime | None = None


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, as the history documents show it."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


#: C0 control characters except tab and newline: PostgreSQL text cannot hold NUL, and the
#: others only garble terminals, logs and the admin page
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")


def clean_text(text: str) -> str:
    """Incoming text as it is stored and sent to the model: CRLF becomes LF, and the other
    C0 control characters but tab and newline are dropped."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))
