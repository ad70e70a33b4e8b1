"""Jobs running through a failover (issue 25, 1): `slotmap run --replicas 1` (sync mode, the
manager as sentinel, the killed server started again) with 12 jobs of 1.5 s on 4 slots;
the primary queue server killed -9 while at least 3 run. Every job is done exactly once,
on its first attempt, and each one running at the kill is acknowledged well before its
lock time (60 s). On 29606e0 the slots' DONEs met the replica before its promotion
(`500 Offline Mode`), the jobs waited for their lock and ran again as attempt 2, and slots
stayed on the restarted old primary. Real processes; bench/failover_inflight.py runs the
same scenario bigger."""
from __future__ import annotations

from pathlib import Path

from procs import REPO_ROOT, import_by_path

scenario = import_by_path("sm_bench_failover_inflight", REPO_ROOT / "bench" / "failover_inflight.py")
# Well under the queue's lock (scenario.LOCK_S): a job left to its lock is not back by then.
ACK_DEADLINE_S = 40.0


def test_jobs_running_at_the_primarys_kill_are_done_once_without_waiting_for_their_lock(tmp_path: Path) -> None:
    with scenario.launched(tmp_path, slots=4) as cluster:
        outcome = scenario.fail_over_with_jobs_running(cluster, jobs=12, job_s=1.5, running=3,
                                                       wait_s=ACK_DEADLINE_S)
        logs = cluster.part_logs()
    assert len(outcome.running_at_kill) >= 3
    late = {key: s for key, s in outcome.ack_s.items() if s is None}
    assert not late, f"running at the kill, not acknowledged within {ACK_DEADLINE_S} s: {late}\n{logs[-4000:]}"
    assert outcome.done == {f"job-{i}" for i in range(12)}, logs[-4000:]
    assert outcome.rerun == [] and outcome.lost == [], outcome.line("sync")
    # Each ran once, as its first attempt: nothing charged.
    assert all(attempts == [1] for attempts in outcome.starts.values()), outcome.starts
    assert outcome.unacknowledged_logs == 0, outcome.line("sync")
