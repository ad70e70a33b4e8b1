"""host_samples.start_failures: why queues' slots do not come up on the host (the last setup()
error of each queue, the handler modules that failed to import), as compact JSON
(manager/storage/samples.py); the tracebacks go with the `handler_start_failed` events.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: samples stored before, masters of the release before, and hosts whose
    # slots all start have none.
    with op.batch_alter_table("host_samples") as batch:
        batch.add_column(sa.Column("start_failures", sa.String(2000), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("host_samples") as batch:
        batch.drop_column("start_failures")
