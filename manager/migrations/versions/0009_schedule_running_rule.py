"""schedules.running_rule: the rule the active manager fires (JSON), so that `slotmap
schedules` and the dashboard show what runs and mark where the config file differs; and
manager_requests: a config reload asked from the API or the CLI, taken by the active
manager (issue 27).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("running_rule", sa.String(2048), nullable=True))
    op.create_table(
        "manager_requests",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("door", sa.String(16), nullable=False),
        sa.Column("requested_at_unix", sa.Float(), nullable=False),
        sa.Column("handled_at_unix", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("manager_requests")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("running_rule")
