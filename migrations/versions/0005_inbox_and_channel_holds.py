"""the inbox and channel holds replace Slack claims and channel tickets

Each job of a channel (a question, an edit or deletion, a button press) is a row of the
inbox, keyed by (channel, key); on PostgreSQL a channel held by a job is a row of
channel_holds. Questions still claimed at the upgrade (being answered, or their answer not
yet posted) move into the inbox, so the new code answers them: nothing in hand is lost.
Turns are found by their Slack message when one is resumed (ix_turns_channel_ts).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "inbox",
        sa.Column("channel_id", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=True),
        sa.Column("payload", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("notes", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel_id", "key"),
    )
    with op.batch_alter_table("inbox", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_status_lease", ["status", "lease_until"], unique=False)
    op.create_table(
        "channel_holds",
        sa.Column("channel_id", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel_id"),
    )
    # questions in hand: queued again, their lease run out, so a running bot takes them over
    op.execute(
        """
        INSERT INTO inbox (channel_id, key, kind, event_id, payload, status, holder,
                           lease_until, created_at, updated_at)
        SELECT channel_id, message_ts, 'question', event_id, question, 'queued', holder,
               created_at, created_at, updated_at
        FROM slack_events
        WHERE status IN ('received', 'stored') AND question IS NOT NULL
        """
    )
    op.drop_table("slack_events")
    op.drop_table("channel_tickets")
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index("ix_turns_channel_ts", ["channel_id", "slack_ts"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index("ix_turns_channel_ts")
    op.create_table(
        "channel_tickets",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("channel_id", sa.String(length=64), nullable=False),
        sa.Column("order_key", sa.String(length=32), nullable=False),
        sa.Column("holding", sa.Boolean(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("channel_tickets", schema=None) as batch_op:
        batch_op.create_index("ix_channel_tickets_channel", ["channel_id", "id"], unique=False)
    op.create_table(
        "slack_events",
        sa.Column("channel_id", sa.String(length=64), nullable=False),
        sa.Column("message_ts", sa.String(length=32), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("question", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("reply", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel_id", "message_ts"),
    )
    with op.batch_alter_table("slack_events", schema=None) as batch_op:
        batch_op.create_index("ix_slack_events_lease_until", ["lease_until"], unique=False)
    op.drop_table("channel_holds")
    op.drop_table("inbox")
