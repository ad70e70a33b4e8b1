"""Fixtures of the slot tests: the permit tests ask a real pulsar (tests/pulsar/served.py)."""
from tests.pulsar.served import client, pulsar, serve

__all__ = ["client", "pulsar", "serve"]
