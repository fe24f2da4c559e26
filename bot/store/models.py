"""Tables. One row per message in one neutral form; the channel ID is the session key."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bot.messages import utcnow

BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    if TYPE_CHECKING:
        # every model here is mapped to a Table of its own (SQLAlchemy types it as any FromClause)
        __table__: ClassVar[Table]


class TurnRow(Base):
    """One turn: a user message and everything the bot did to answer it."""

    __tablename__ = "turns"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    channel_id: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str | None] = mapped_column(String(64))
    slack_ts: Mapped[str | None] = mapped_column(String(32))
    rounds: Mapped[int] = mapped_column(Integer, default=0)
    tools_called: Mapped[list[str]] = mapped_column(JSON, default=list)
    outcome: Mapped[str] = mapped_column(String(32))
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(100))
    api_mode: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    #: a stopped turn's state (bot.messages.TurnState); null otherwise
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_turns_channel_id", "channel_id", "id"),
        Index("ix_turns_outcome_channel", "outcome", "channel_id"),
        Index("ix_turns_channel_ts", "channel_id", "slack_ts"),
    )


class FeedbackRow(Base):
    """One person's verdict on a turn's answer; a later press of theirs replaces it."""

    __tablename__ = "feedback"

    turn_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: positive or negative
    value: Mapped[str] = mapped_column(String(16))
    given_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MessageRow(Base):
    """One message of a channel's history; ``position`` orders the channel."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    channel_id: Mapped[str] = mapped_column(String(64))
    position: Mapped[int] = mapped_column(BigInteger)
    turn_id: Mapped[int | None] = mapped_column(BigId, ForeignKey("turns.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True))
    tool_call_id: Mapped[str | None] = mapped_column(String(128))
    tool_name: Mapped[str | None] = mapped_column(String(128))
    user_id: Mapped[str | None] = mapped_column(String(64))
    slack_ts: Mapped[str | None] = mapped_column(String(32))
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: when a person last edited it in Slack
    edited_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: a question asked in a thread: the thread's messages its content shows (with their
    #: Slack ts) and the question alone, so that the content follows Slack's changes
    context: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))

    __table_args__ = (
        UniqueConstraint("channel_id", "position", name="uq_messages_channel_position"),
        Index("ix_messages_channel_ts", "channel_id", "slack_ts"),
        Index("ix_messages_turn_id", "turn_id"),
        Index("ix_messages_created_at", "created_at"),
    )


class SummaryRow(Base):
    """What the model wrote of a channel's messages that fell out of its window: it covers
    the channel's stored messages from ``first_message_id`` to ``last_message_id`` (each
    summary carries the one before it, so the newest covers all the older ones)."""

    __tablename__ = "summaries"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    channel_id: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    first_message_id: Mapped[int] = mapped_column(BigInteger)
    last_message_id: Mapped[int] = mapped_column(BigInteger)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_summaries_channel_last", "channel_id", "last_message_id"),)


class PersonRow(Base):
    """A Slack user's display name, as Slack last told it (the admin pages and the CLI,
    which cannot ask Slack, show it beside the ID)."""

    __tablename__ = "people"

    user_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ThreadAskerRow(Base):
    """Someone the bot answered in a thread of a channel: their replies there are follow-ups."""

    __tablename__ = "thread_askers"

    channel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_ts: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChannelRow(Base):
    """What is known of a channel besides its messages (its name, when Slack tells)."""

    __tablename__ = "channels"

    channel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChannelSettingsRow(Base):
    """A channel's own settings (bot.channels), as their admins set them: key -> text."""

    __tablename__ = "channel_settings"

    channel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    settings: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChannelSettingChangeRow(Base):
    """One change of a channel's setting: the key, its new value (null: unset), who
    (``cli`` or ``admin``) and when."""

    __tablename__ = "channel_setting_changes"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    channel_id: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(32))
    value: Mapped[str | None] = mapped_column(Text)
    by: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_channel_setting_changes_channel", "channel_id", "id"),)


class InboxRow(Base):
    """A job of a channel (a Slack message to answer, an edit or deletion to follow, a
    button pressed), keyed by (channel, key): a second delivery meets the first here. Owned
    by bot.jobs: its holder renews the lease; another process takes a job over once the
    lease ran out. ``key`` (a Slack ts) is also the job's place in its channel's order."""

    __tablename__ = "inbox"

    channel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    event_id: Mapped[str | None] = mapped_column(String(64))
    #: what doing the job needs, as the shell wrote it (None: SQL NULL, not JSON null)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    #: what its holder recorded while doing it, for whoever takes it over
    notes: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    #: queued (to do or being done), done, failed (a Slack retry may do it again)
    status: Mapped[str] = mapped_column(String(16))
    #: the process doing it (see bot.jobs)
    holder: Mapped[str | None] = mapped_column(String(64))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_inbox_status_lease", "status", "lease_until"),)


class ChannelHoldRow(Base):
    """PostgreSQL: which job holds a channel, across processes. Owned by bot.jobs; a row
    per held channel, so taking one is one conditional upsert (the row is the mutex)."""

    __tablename__ = "channel_holds"

    channel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(64))
    lease_until: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AdminSessionRow(Base):
    """A browser logged in to the admin pages. Its cookie holds a random session id, of
    which only the SHA-256 is kept here (the table cannot be used to log in); ``token_key``
    is that of the ADMIN_TOKEN it logged in with, so a new token ends it."""

    __tablename__ = "admin_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_key: Mapped[str] = mapped_column(String(64))
    csrf: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_admin_sessions_expires_at", "expires_at"),)


class AccountRow(Base):
    """A CRM account (company)."""

    __tablename__ = "crm_accounts"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    industry: Mapped[str | None] = mapped_column(String(200))
    tier: Mapped[str | None] = mapped_column(String(100))
    owner: Mapped[str | None] = mapped_column(String(200))
    notes: Mapped[str | None] = mapped_column(Text)
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    __table_args__ = (Index("ix_crm_accounts_name", "name"),)


class ContactRow(Base):
    """A CRM contact (a person), optionally at an account."""

    __tablename__ = "crm_contacts"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    email: Mapped[str | None] = mapped_column(String(300))
    phone: Mapped[str | None] = mapped_column(String(100))
    title: Mapped[str | None] = mapped_column(String(200))
    account_id: Mapped[str | None] = mapped_column(String(64))
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    __table_args__ = (
        Index("ix_crm_contacts_name", "name"),
        Index("ix_crm_contacts_email", "email"),
        Index("ix_crm_contacts_account", "account_id"),
    )


class NoteRow(Base):
    """A note logged on a contact of the bot's own CRM tables (``crm_log_note`` with
    CRM=local); ``marker`` is the call's idempotency marker, so a call is written once."""

    __tablename__ = "crm_notes"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    contact_id: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    marker: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_crm_notes_contact", "contact_id"),)
