"""queue_authority.min_sync_replicas: the confirmations the primary reported it waits for
(ROLE's <min-sync>, 0: async), so that a promotion is judged by what the servers enforce
and not by the manager's own config (manager/failover/sentinel.py). NULL: not reported
yet; the manager's config stands in until the primary's next ROLE.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("queue_authority") as batch:
        batch.add_column(sa.Column("min_sync_replicas", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queue_authority") as batch:
        batch.drop_column("min_sync_replicas")
