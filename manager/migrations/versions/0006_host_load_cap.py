"""host_samples: the notice of a master's load bound setting its capacity (None when it does not).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: samples stored before, and hosts not capped, have none.
    with op.batch_alter_table("host_samples") as batch:
        batch.add_column(sa.Column("load_cap", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("host_samples") as batch:
        batch.drop_column("load_cap")
