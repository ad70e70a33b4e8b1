"""host_samples: slots recycled after max_jobs_per_slot and after max_slot_age_s, beside those
recycled for memory.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # 0 for samples stored before and from masters of the release before: they recycled none
    # this way (they had no such limits).
    with op.batch_alter_table("host_samples") as batch:
        batch.add_column(sa.Column("recycled_for_jobs", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("recycled_for_age", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("host_samples") as batch:
        batch.drop_column("recycled_for_age")
        batch.drop_column("recycled_for_jobs")
