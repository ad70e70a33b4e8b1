"""queue_samples: failed (waiting for a retry) and dead jobs, whether the config names the queue
and whether any master has its handler (issue 15).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: samples stored before did not say (read as 0 failed and dead, configured, handled unknown).
    with op.batch_alter_table("queue_samples") as batch:
        batch.add_column(sa.Column("failed", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("dead", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("configured", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("handled", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queue_samples") as batch:
        batch.drop_column("handled")
        batch.drop_column("configured")
        batch.drop_column("dead")
        batch.drop_column("failed")
