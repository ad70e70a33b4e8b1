"""Whether the queue servers and the manager's config agree on what a promotion is judged
by: the confirmations a primary waits for before it acknowledges (ROLE's <min-sync>, 0 in
async mode), and on the failover being managed at all (ROLE's <lease> not `unmanaged`).
Pure logic over what each server last said.

The sentinel judges by what the primary reported (recorded in the cluster database), never
by the manager's config: a config saying more than the servers enforce let a replica that
lacked acknowledged jobs be promoted (33 of 43 lost in tests/queue_server/server/
test_sentinel_min_sync.py before that), one saying fewer refused a safe promotion for as
long as one replica stayed silent. A disagreement is still a mistake of the operator's,
and a cluster whose servers differ changes its rule at every failover: said loudly.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping


def describe(min_sync: int) -> str:
    return "async" if min_sync == 0 else f"{min_sync}"


def mismatch(reported: Mapping[str, int | None], *, configured: int,
             unmanaged: Collection[str] = ()) -> str:
    """What disagrees ("" when nothing does): servers that report different values, a
    value other than the manager's `configured` one (0: replicate = "async"), servers that
    do not report it (an older release: the manager's value stands in for them), and
    servers not started for managed failover (ROLE's lease `unmanaged`). `reported` is
    each server's last word: a server silent now keeps the one it said before."""
    said = [_min_sync(reported, configured)]
    if unmanaged:
        said.append(f"{', '.join(sorted(unmanaged))} not started for managed failover (--managed, "
                    "managed_failover = true): it refuses LEASE, PROMOTE and FOLLOW, acknowledges "
                    "without a lease and, as a replica, promotes itself after its own "
                    "promote_after_s (a second primary)")
    return "; ".join(part for part in said if part)


def _min_sync(reported: Mapping[str, int | None], configured: int) -> str:
    values = {value for value in reported.values() if value is not None}
    unknown = sorted(address for address, value in reported.items() if value is None)
    said = ", ".join(f"{address} {describe(value)}" for address, value in sorted(reported.items())
                     if value is not None)
    found = []
    if len(values) > 1:
        found.append(f"the queue servers differ ({said}): each failover changes the rule")
    elif values and values != {configured}:
        found.append(f"the queue servers enforce {describe(values.pop())}, the manager's config "
                     f"says {describe(configured)}: what the primary enforces is used")
    if unknown:
        found.append(f"{', '.join(unknown)} do(es) not report it (an older release): the "
                     f"manager's config value {describe(configured)} stands in")
    if not found:
        return ""
    return ("min_sync_replicas (confirmations before a primary acknowledges): " + "; ".join(found)
            + "; make [queue_server] min_sync_replicas and replicate the same for the servers and "
            "the manager")
