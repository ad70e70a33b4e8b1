"""A dead slot's batch, settled: master/settle.py decides, this sends the requests and counts."""
from __future__ import annotations

import logging
import random
from collections import Counter as Tally

from master.lease_keeper import LeaseKeeper
from master.leases import LeasePipes
from master.lifecycle import Counter, SettleJobs
from master.settle import ReplyTo, Settlement, settle
from queue_server.protocol.retry import RetryPolicy
from slot.handler import Handler

log = logging.getLogger(__name__)


def settle_dead_batch(action: SettleJobs, *, cls: type[Handler] | None, policy: RetryPolicy | None,
                      leases: LeasePipes, keeper: LeaseKeeper, counters: Tally[Counter],
                      rng: random.Random) -> Settlement:
    """What its handler decided stands, one job is charged only when the death names it, the
    others go back uncharged. `cls`: the queue's handler (None: no handler serves it now);
    `policy`: the handler's own retry policy (None: the queue's)."""
    reply_to = None if cls is None else ReplyTo(cls.output_queue(), cls.reply_ttl_s)
    running, done_positions = leases.batch_page(action.slot_id, len(action.lease.jobs))
    settled = settle(action.lease, action.outcomes, reason=action.reason, blame=action.blame,
                     ordered=action.ordered, running=running, done_positions=done_positions,
                     gone=action.gone,
                     policy=policy, reply_to=reply_to, rng=rng)
    for bad in settled.bad_notes:
        log.warning("%s: %s", action.reason, bad)
    keeper.send(settled.requests)
    counters[Counter.JOBS_OF_DEAD_SLOTS_FAILED] += settled.charged
    counters[Counter.JOBS_OF_DEAD_SLOTS_HONOURED] += settled.honoured
    counters[Counter.JOBS_OF_DEAD_SLOTS_GIVEN_BACK] += settled.given_back
    log.warning("%s holding %d jobs of %s: %d outcomes honoured, %d given back uncharged, "
                "%d charged%s", action.reason, len(action.lease.jobs),
                action.queue, settled.honoured, settled.given_back, settled.charged,
                f" (job {settled.blamed_key})" if settled.blamed_key else "")
    return settled
