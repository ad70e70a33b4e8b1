"""The masters' link: the ZeroMQ socket, each master's heartbeat and state, their reports,
the slots running now (live.py), load caps, `slotmap hosts`. Uses planning (placement,
slot numbers), events and storage."""
