"""messages keep when they were last edited

A message edited in Slack is edited in the stored history. ``edited_at`` also tells a
process that kept a channel's window in memory that a message in it changed, whichever
process stored the edit.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 21:35:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("edited_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("edited_at")
