"""notes logged on the bot's own CRM contacts

``crm_log_note`` with CRM=local writes a note on a contact of the bot's tables
(``crm_notes``); its idempotency marker is unique, so a call is written once.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "crm_notes",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("contact_id", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("marker", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("marker"),
    )
    op.create_index("ix_crm_notes_contact", "crm_notes", ["contact_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_crm_notes_contact", table_name="crm_notes")
    op.drop_table("crm_notes")
