"""History tables: queue and host samples, the slot map, events, queue overrides (manager/storage/db.py).

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.Integer(), autoincrement=True, nullable=False, primary_key=True)


def upgrade() -> None:
    op.create_table(
        "events",
        _id(),
        sa.Column("at_unix", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("queue", sa.String(length=128), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=True),
    )
    op.create_index("ix_events_at_unix", "events", ["at_unix"])
    op.create_index("ix_events_kind", "events", ["kind"])

    op.create_table(
        "host_samples",
        _id(),
        sa.Column("at_unix", sa.Float(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("alive", sa.Boolean(), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("mem_total_bytes", sa.BigInteger(), nullable=False),
        sa.Column("mem_available_bytes", sa.BigInteger(), nullable=False),
        sa.Column("master_pss_bytes", sa.BigInteger(), nullable=False),
        sa.Column("slots_pss_bytes", sa.BigInteger(), nullable=False),
        sa.Column("avg_slot_bytes", sa.BigInteger(), nullable=False),
        sa.Column("load_avg_1m", sa.Float(), nullable=False),
        sa.Column("recycled_for_memory", sa.Integer(), nullable=False),
        sa.Column("killed_hung", sa.Integer(), nullable=False),
    )
    op.create_index("ix_host_samples_at_unix", "host_samples", ["at_unix"])
    op.create_index("ix_host_samples_host_at", "host_samples", ["host", "at_unix"])

    op.create_table(
        "queue_overrides",
        sa.Column("queue", sa.String(length=128), nullable=False, primary_key=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("min_slots", sa.Integer(), nullable=True),
        sa.Column("max_slots", sa.Integer(), nullable=True),
        sa.Column("updated_at_unix", sa.Float(), nullable=False),
    )

    op.create_table(
        "queue_samples",
        _id(),
        sa.Column("at_unix", sa.Float(), nullable=False),
        sa.Column("queue", sa.String(length=128), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("min_slots", sa.Integer(), nullable=False),
        sa.Column("max_slots", sa.Integer(), nullable=False),
        sa.Column("slots_current", sa.Integer(), nullable=False),
        sa.Column("slots_avg", sa.Float(), nullable=False),
        sa.Column("slots_desired", sa.Integer(), nullable=False),
        sa.Column("load", sa.Float(), nullable=False),
        sa.Column("waiting", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("delayed", sa.Integer(), nullable=False),
        sa.Column("jobs_done", sa.Integer(), nullable=False),
        sa.Column("jobs_per_s", sa.Float(), nullable=False),
        sa.Column("mean_job_s", sa.Float(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_queue_samples_at_unix", "queue_samples", ["at_unix"])
    op.create_index("ix_queue_samples_queue_at", "queue_samples", ["queue", "at_unix"])

    op.create_table(
        "slot_map",
        _id(),
        sa.Column("at_unix", sa.Float(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("queue", sa.String(length=128), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
    )
    op.create_index("ix_slot_map_at_unix", "slot_map", ["at_unix"])


def downgrade() -> None:
    for table in ("slot_map", "queue_samples", "queue_overrides", "host_samples", "events"):
        op.drop_table(table)
