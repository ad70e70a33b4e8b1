"""schedules: each periodic job's last tick, fire under way, pause and "run now" (issue 18).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("name", sa.String(length=64), primary_key=True),
        sa.Column("last_tick_unix", sa.Float(), nullable=True),
        sa.Column("in_flight_unix", sa.Float(), nullable=True),
        sa.Column("last_job_key", sa.String(length=160), nullable=True),
        sa.Column("last_fired_at_unix", sa.Float(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("run_requested_at_unix", sa.Float(), nullable=True),
        sa.Column("updated_at_unix", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("schedules")
