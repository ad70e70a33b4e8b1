"""Alembic migrations of the manager history tables (run by manager.storage.store.upgrade)."""
