"""queue_samples: the batch size the slots use and where it came from (config or handler class).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: samples stored before, and queues no master has a handler for, have none.
    with op.batch_alter_table("queue_samples") as batch:
        batch.add_column(sa.Column("batch_size", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("batch_size_source", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queue_samples") as batch:
        batch.drop_column("batch_size_source")
        batch.drop_column("batch_size")
