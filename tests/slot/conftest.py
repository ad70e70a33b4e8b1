"""Fixtures of the slot tests: the permit tests ask a real pulsar (tests/slot/pulsar/served.py)."""
from tests.slot.pulsar.served import client, pulsar, serve

__all__ = ["client", "pulsar", "serve"]
