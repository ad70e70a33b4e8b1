"""Bounded field types for what a peer sends (host reports, beacons, the manager link).

Every number from another process is finite and within a range, every string has a length
(and, for names, a pattern), every list and map a count: one bad or hostile frame is
refused where it enters (Frame.decode) instead of reaching the planner or a page. The
bounds are generous for a real peer and small enough that no frame can hurt the reader.
"""
from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from config.names import HOST_NAME_PATTERN, QUEUE_NAME_PATTERN

# Counters and byte counts: a signed 64-bit integer, as SQL stores them.
MAX_COUNT = 2**63 - 1
# A pid on Linux is below 2**22; any 32-bit value is taken.
MAX_PID = 2**31 - 1
# Every duration from outside (a peer's uptime, a config's lock time, DELAY/TTL on a request
# line): about 317 years. One bound for config/ and the queue server's wire numbers
# (queue_server/protocol/numbers.py reads it from here: config/ imports no other package).
MAX_SECONDS: Final = 10**10
# A Unix time: up to the year 2286.
MAX_UNIX_TIME = 1e10
# A load average or a ratio: far above any real host's.
MAX_LOAD = 1e6
# Free text from a peer (a handler's import error, a slot's exit reason).
MAX_TEXT_CHARS = 2000
# Names of other things a peer reports (a handler's class path).
MAX_NAME_CHARS = 512
# Slots in one host report or one host's part of the map.
MAX_SLOTS = 10_000
# Queues (handled, unhandled, failed handler sources) in one host report.
MAX_QUEUES = 4096

HostName = Annotated[str, Field(pattern=HOST_NAME_PATTERN)]
QueueName = Annotated[str, Field(pattern=QUEUE_NAME_PATTERN)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Pid = Annotated[int, Field(ge=1, le=MAX_PID)]
SlotNumber = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
UnixTime = Annotated[float, Field(ge=0, le=MAX_UNIX_TIME, allow_inf_nan=False)]
Load = Annotated[float, Field(ge=0, le=MAX_LOAD, allow_inf_nan=False)]
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
