"""host_samples: the version of the master's handler code, and why its last code reload failed.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: samples stored before, masters of the release before, and hosts without
    # a refused reload have none.
    with op.batch_alter_table("host_samples") as batch:
        batch.add_column(sa.Column("code_version", sa.String(64), nullable=True))
        batch.add_column(sa.Column("code_reload_failure", sa.String(500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("host_samples") as batch:
        batch.drop_column("code_reload_failure")
        batch.drop_column("code_version")
