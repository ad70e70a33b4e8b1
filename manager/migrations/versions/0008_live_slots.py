"""live_slots: the slots running per queue now, rewritten by the manager every half second.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "live_slots",
        sa.Column("queue", sa.String(128), primary_key=True),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("assigned", sa.Integer(), nullable=False),
        sa.Column("at_unix", sa.Float(), nullable=False),
        sa.Column("reports_age_s", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("live_slots")
