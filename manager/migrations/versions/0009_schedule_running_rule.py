"""schedules.running_rule: the rule the active manager fires (JSON), so that `slotmap
schedules` and the dashboard show what runs and mark where the config file differs (issue 27).

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


def downgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("running_rule")
