"""Fixtures of the pulsar tests: a real pulsar in a thread and clients of it (served.py)."""
from tests.pulsar.served import client, pulsar, serve

__all__ = ["client", "pulsar", "serve"]
