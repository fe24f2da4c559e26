"""turns indexed by outcome and channel

Every turn looks for its channel's turns still marked running (cut short by a crash). With
an index on the outcome alone, PostgreSQL may combine it with the channel's index, reading
an entry for every turn the channel ever had.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 15:20:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index("ix_turns_outcome_channel", ["outcome", "channel_id"], unique=False)
        batch_op.drop_index("ix_turns_outcome")


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index("ix_turns_outcome", ["outcome"], unique=False)
        batch_op.drop_index("ix_turns_outcome_channel")
