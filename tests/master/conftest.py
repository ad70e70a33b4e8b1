"""Fixtures of the master tests; the helpers live in master_procs.py and job_runs.py (unique
module names, so test files can import them whatever other conftest.py pytest has loaded)."""
from job_runs import job_cluster
from master_procs import _server_ahead, queue_server, queue_server_for, start_master

__all__ = ["_server_ahead", "job_cluster", "queue_server", "queue_server_for", "start_master"]
