"""admin sessions kept server side

A browser's login to the admin pages is a row here, so that logging out, or a new
ADMIN_TOKEN, ends it at once in every process (the signed cookie alone stayed valid for
12 hours). Cookies issued before the upgrade name no row: their holders log in again.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 13:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "admin_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("token_key", sa.String(length=64), nullable=False),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_hash"),
    )
    with op.batch_alter_table("admin_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_admin_sessions_expires_at", ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("admin_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_admin_sessions_expires_at")
    op.drop_table("admin_sessions")
