"""feedback: one verdict per person per turn on the bot's answers

A press of the feedback buttons under an answer stores (turn, person) -> positive or
negative; a later press of the same person replaces it. Forgetting a turn (a session
deleted, retention) forgets its feedback with it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 13:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "feedback",
        sa.Column("turn_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=16), nullable=False),
        sa.Column("given_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("turn_id", "user_id"),
    )


def downgrade() -> None:
    op.drop_table("feedback")
