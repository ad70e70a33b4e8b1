"""queue_authority: the queue servers' primary and epoch (issue 17, manager/failover/sentinel.py).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "queue_authority",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("primary", sa.String(length=255), nullable=False),
        sa.Column("in_sync", sa.Boolean(), nullable=False),
        sa.Column("sync_replicas", sa.Text(), nullable=False),
        sa.Column("updated_at_unix", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("queue_authority")
