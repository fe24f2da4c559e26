"""Tables. One row per message in one neutral form; the channel ID is the session key."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bot.messages import utcnow

BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass


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
    #: a paused turn's resumable state (e.g. waiting for approval); null otherwise
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_turns_channel_id", "channel_id", "id"),
        Index("ix_turns_outcome_channel", "outcome", "channel_id"),
    )


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

    __table_args__ = (
        UniqueConstraint("channel_id", "position", name="uq_messages_channel_position"),
        Index("ix_messages_channel_ts", "channel_id", "slack_ts"),
        Index("ix_messages_turn_id", "turn_id"),
        Index("ix_messages_created_at", "created_at"),
    )


class ChannelTicket(Base):
    """A place in a channel's queue. The live ticket that comes first by (order_key, id)
    takes the channel when no other ticket holds it.

    Tickets are rows rather than held connections or session advisory locks, so waiting
    turns cost no connection, the order is the messages' Slack order across processes, and
    a crashed holder's ticket simply expires.
    """

    __tablename__ = "channel_tickets"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    channel_id: Mapped[str] = mapped_column(String(64))
    #: the message's Slack ts (or the arrival time in the same format)
    order_key: Mapped[str] = mapped_column(String(32))
    holding: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_channel_tickets_channel", "channel_id", "id"),)


class ChannelRow(Base):
    """What is known of a channel besides its messages (its name, when Slack tells)."""

    __tablename__ = "channels"

    channel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SlackEventRow(Base):
    """A Slack message the bot has taken on, keyed by (channel, ts): deliveries of the
    same message (retries, other processes, app_mention + message) find it here, and so
    does any process taking over from a holder that died."""

    __tablename__ = "slack_events"

    channel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    message_ts: Mapped[str] = mapped_column(String(32), primary_key=True)
    event_id: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    #: the process working on it (see SlackEvents.holder)
    holder: Mapped[str | None] = mapped_column(String(64))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: what answering it needs, as the shell wrote it (None: SQL NULL, not JSON null)
    question: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    #: the stored turn's reply, as the shell wrote it, until it is posted
    reply: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_slack_events_lease_until", "lease_until"),)


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
