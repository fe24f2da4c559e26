"""claims keep their question, holder and stored reply

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 12:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("slack_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("holder", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("question", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("reply", sa.JSON(), nullable=True))
        batch_op.create_index("ix_slack_events_lease_until", ["lease_until"], unique=False)


def downgrade() -> None:
    # the older code knows no `stored` claim; it could not post the reply anyway
    slack_events = sa.table(
        "slack_events", sa.column("status", sa.String), sa.column("lease_until", sa.DateTime)
    )
    op.execute(
        slack_events.update()
        .where(slack_events.c.status == "stored")
        .values(status="done", lease_until=None)
    )
    with op.batch_alter_table("slack_events", schema=None) as batch_op:
        batch_op.drop_index("ix_slack_events_lease_until")
        batch_op.drop_column("reply")
        batch_op.drop_column("question")
        batch_op.drop_column("holder")
