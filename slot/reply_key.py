"""A reply's key (pure): the same whoever sends the reply and however often.

A reply goes to the caller's queue as a PUT under the caller's item. It may be sent more
than once: by the slot again to the primary found anew after a lost connection (a
failover, a stalled primary taken for a frozen one: slot/source.py), and by the master
when the slot died after it noted the reply (master/settle.py, master/lease_keeper.py),
whether or not the slot had sent it first. Every send names the key derived here, so a
second one meets `EXISTS` while the first waits or runs, and the master can ask the queue
server (`JOB <key>`) whether the slot's one arrived at all.

Derived, not drawn at random: the master learns the job's lease id and item from the
slot's REPLY note (slot/outcome_notes.py), so the note is unchanged and notes written by
the previous release settle the same way. The lease id is given once in a cluster's
history (a new one on every hand-out, carried across restarts and failovers: PROTOCOL.md
"Lease ids across restarts and failovers"), so no two runs' replies share a key.
"""
from __future__ import annotations

import hashlib
from typing import NamedTuple

# A producer's key may not start with `_` (the server's own); `reply.` and 32 hex digits
# (128 bits of a hash) fit the key syntax `[A-Za-z0-9_.:@-]{1,128}`.
REPLY_KEY_PREFIX = "reply."


class Reply(NamedTuple):
    """One answer: `job_id` is the lease id of the job it answers (job.reply())."""

    job_id: int
    item: str
    data: bytes


def reply_key(queue: str, job_id: int, item: str) -> str:
    """`reply.<32 hex>` of the output queue, the lease id and the caller's item (names hold
    no newline: `[A-Za-z0-9_]+`, so the fields cannot run into each other)."""
    digest = hashlib.blake2b(f"{queue}\n{job_id}\n{item}".encode(), digest_size=16).hexdigest()
    return f"{REPLY_KEY_PREFIX}{digest}"
