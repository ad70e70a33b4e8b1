"""Fixtures of the master tests; the helpers live in master_procs.py (a unique module name,
so test files can import them whatever other conftest.py pytest has loaded)."""
from master_procs import queue_server, queue_server_for, start_master

__all__ = ["queue_server", "queue_server_for", "start_master"]
