"""each channel's own settings, and their changes

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "channel_settings",
        sa.Column("channel_id", sa.String(length=64), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel_id"),
    )
    op.create_table(
        "channel_setting_changes",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("channel_id", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("by", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("channel_setting_changes", schema=None) as batch_op:
        batch_op.create_index(
            "ix_channel_setting_changes_channel", ["channel_id", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("channel_setting_changes", schema=None) as batch_op:
        batch_op.drop_index("ix_channel_setting_changes_channel")
    op.drop_table("channel_setting_changes")
    op.drop_table("channel_settings")
