"""the conversation around a question

A question asked in a thread keeps the thread's messages it was shown (``messages.context``,
with their Slack ts, so that a deletion or an edit in Slack reaches them); the people the
bot answered in a thread (``thread_askers``: their replies there are follow-ups); and the
display names Slack gave for user IDs (``people``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("context", sa.JSON(none_as_null=True), nullable=True))
    op.create_table(
        "people",
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id"),
    )
    op.create_table(
        "thread_askers",
        sa.Column("channel_id", sa.String(length=64), nullable=False),
        sa.Column("thread_ts", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel_id", "thread_ts", "user_id"),
    )


def downgrade() -> None:
    op.drop_table("thread_askers")
    op.drop_table("people")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("context")
