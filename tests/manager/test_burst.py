"""Bursts between plans (manager/planning/burst.py): which backlogs count as a burst, and a plan that grows
only the bursting queue, from free capacity and lower priorities, past its dead band."""
from __future__ import annotations

from config.models import QueueConfig
from manager.planning.burst import (
    BURST_DRAIN_S,
    backlog_drain_s,
    bursting,
    outlasts_noise,
    plan_burst,
)
from manager.planning.job_times import JobTimeMemory
from manager.planning.planner import ASSUMED_JOB_S, job_time_s
from manager.storage.model import HostCapacity, QueueStats, SlotMap

TARGET = 0.8
QUEUES = {
    "burst": QueueConfig(priority=5, min_slots=1, max_slots=8, batch_size=10),
    "bulk": QueueConfig(priority=0, min_slots=1, max_slots=10, batch_size=10),
    "vip": QueueConfig(priority=9, min_slots=0, max_slots=10, batch_size=10),
}


def one_host(slots: dict[str, str]) -> SlotMap:
    return SlotMap(hosts={"h": slots})


def test_a_backlog_that_appears_or_doubles_by_two_batches_is_a_burst_and_any_backlog_without_a_slot() -> None:
    slots = {"burst": 1, "bulk": 9}
    assert bursting({}, {"burst": 4000}, QUEUES, slots) == ["burst"]
    assert bursting({"burst": 100}, {"burst": 150}, QUEUES, slots) == []       # not doubled
    assert bursting({"burst": 5}, {"burst": 20}, QUEUES, slots) == []          # < 2 batches more
    assert bursting({"burst": 5}, {"burst": 25}, QUEUES, slots) == ["burst"]
    assert bursting({}, {"burst": 4000}, QUEUES, {"burst": 8}) == []           # at its max already
    # A backlog appearing in a queue with no slot is a burst at one job; with slots, at two batches.
    assert bursting({}, {"burst": 1, "vip": 1}, QUEUES, slots) == ["vip"]
    assert bursting({}, {"burst": 1, "vip": 1}, QUEUES, {**slots, "vip": 1}) == []
    assert bursting({}, {"burst": 20, "vip": 20}, QUEUES, {**slots, "vip": 1}) == ["vip", "burst"]


def test_the_burst_queue_takes_lower_priority_slots_down_to_their_minimum_and_nothing_else_moves() -> None:
    current = one_host({**{f"h:{n}": "bulk" for n in range(9)}, "h:9": "burst"})
    # 4,000 jobs of 20 ms behind one slot: 80 s of backlog, far past the dead band.
    stats = {"burst": QueueStats(waiting_jobs=4000, jobs_done=3000, busy_s=60.0, slot_lifetime_s=60.0)}
    result = plan_burst(current, QUEUES, stats, [HostCapacity("h", 10)], ["burst"], target_load=TARGET)
    assert result.slot_map.counts() == {"burst": 8, "bulk": 2}
    assert all(move.kind == "retarget" for move in result.moves)
    assert result.queues["burst"].desired_slots == 8


def test_free_capacity_goes_first_and_higher_priorities_are_never_taken() -> None:
    current = one_host({"h:0": "burst", **{f"h:{n}": "vip" for n in range(1, 7)}})
    stats = {"burst": QueueStats(waiting_jobs=4000, jobs_done=3000, busy_s=60.0, slot_lifetime_s=60.0)}
    result = plan_burst(current, QUEUES, stats, [HostCapacity("h", 10)], ["burst"], target_load=TARGET)
    assert result.slot_map.counts() == {"burst": 4, "vip": 6}


def test_a_small_rise_inside_the_dead_band_moves_nothing() -> None:
    current = one_host({**{f"h:{n}": "burst" for n in range(4)}, **{f"h:{n}": "bulk" for n in range(4, 10)}})
    # 4 slots busy 60% of the window and 9 jobs of 1 s waiting (2.25 s for the 4 slots to
    # start, a burst by its drain time): demand (2.4 + 0.9) / 0.8 is within 4 x (1 + 0.05).
    stats = {"burst": QueueStats(waiting_jobs=9, jobs_done=144, busy_s=144.0, slot_lifetime_s=240.0)}
    assert backlog_drain_s(stats["burst"], 4) >= BURST_DRAIN_S
    result = plan_burst(current, QUEUES, stats, [HostCapacity("h", 10)], ["burst"], target_load=TARGET)
    assert result.moves == ()


def test_a_backlog_the_slots_start_within_the_drain_time_is_no_burst_however_it_jumped() -> None:
    queues = {"media": QueueConfig(priority=4, max_slots=64, batch_size=1),
              "archive": QueueConfig(priority=0, max_slots=64, batch_size=1)}
    current = one_host({**{f"h:{n}": "media" for n in range(22)},
                        **{f"h:{n}": "archive" for n in range(22, 64)}})
    hosts = [HostCapacity("h", 64)]

    def media(waiting: int) -> QueueStats:  # 16 of 22 slots busy with jobs of 2 s
        return QueueStats(waiting_jobs=waiting, jobs_done=480, busy_s=960.0, slot_lifetime_s=1320.0)

    # 14 jobs behind 22 busy slots (Poisson noise, seen 20 times a plan): 1.3 s of work per
    # slot, gone before a new slot could arrive; 22 jobs, 2 s, within two of its 2 s jobs.
    assert bursting({}, {"media": 14}, queues, {"media": 22, "archive": 42}) == ["media"]
    for waiting in (14, 22):
        assert not outlasts_noise(media(waiting), 22)
        assert plan_burst(current, queues, {"media": media(waiting)}, hosts, ["media"],
                          target_load=TARGET).moves == ()
    # 66 jobs, 6 s of work per slot, is a burst: archive gives slots.
    assert outlasts_noise(media(66), 22)
    result = plan_burst(current, queues, {"media": media(66)}, hosts, ["media"], target_load=TARGET)
    assert result.slot_map.counts()["media"] > 22
    # Short jobs: the 2 s floor holds (40 jobs of 0.1 s behind 1 slot: 4 s, a burst).
    quick = QueueStats(waiting_jobs=40, jobs_done=600, busy_s=60.0, slot_lifetime_s=60.0)
    assert outlasts_noise(quick, 1) and not outlasts_noise(quick, 3)


def test_drain_time_is_unbounded_without_a_slot_or_a_measured_or_remembered_job_time() -> None:
    waiting = QueueStats(waiting_jobs=3)
    assert backlog_drain_s(waiting, 0) == float("inf")
    # Nothing done in the window: the job time remembered from before it, else unknown.
    assert backlog_drain_s(waiting, 5) == float("inf")
    assert backlog_drain_s(QueueStats(waiting_jobs=3, known_job_s=2.0), 5) == 3 * 2.0 / 5
    assert backlog_drain_s(QueueStats(), 5) == 0.0
    done = QueueStats(waiting_jobs=30, jobs_done=10, busy_s=20.0, slot_lifetime_s=60.0)
    assert backlog_drain_s(done, 3) == 30 * 2.0 / 3


def test_a_burst_takes_lower_priorities_spares_before_free_capacity_and_never_a_higher_ones() -> None:
    # bulk (priority 0) holds 5 slots where the last full plan gave it 2: 3 spares, idle and
    # warm. The burst retargets them before it forks into the 2 free slots.
    current = one_host({**{f"h:{n}": "burst" for n in range(5)},
                        **{f"h:{n}": "bulk" for n in range(5, 10)}})
    stats = {"burst": QueueStats(waiting_jobs=4000, jobs_done=3000, busy_s=60.0, slot_lifetime_s=60.0)}
    result = plan_burst(current, QUEUES, stats, [HostCapacity("h", 12)], ["burst"],
                        target_load=TARGET, last_planned={"bulk": 2, "burst": 5})
    assert result.slot_map.counts() == {"burst": 8, "bulk": 2}
    assert [(m.kind, m.from_queue) for m in result.moves] == [("retarget", "bulk")] * 3
    # Without the last plan's counts nothing is a spare: free capacity first, then one of
    # bulk's slots as a lower priority's above its minimum, as before.
    plain = plan_burst(current, QUEUES, stats, [HostCapacity("h", 12)], ["burst"], target_load=TARGET)
    assert plain.slot_map.counts() == {"burst": 8, "bulk": 4}
    assert sorted(m.kind for m in plain.moves) == ["retarget", "spawn", "spawn"]
    # vip (priority 9) with the same 3 spares keeps them: a burst takes only from lower
    # priorities; it forks into the free slots instead.
    above = one_host({**{f"h:{n}": "burst" for n in range(5)},
                      **{f"h:{n}": "vip" for n in range(5, 10)}})
    kept = plan_burst(above, QUEUES, stats, [HostCapacity("h", 12)], ["burst"],
                      target_load=TARGET, last_planned={"vip": 2, "burst": 5})
    assert kept.slot_map.counts() == {"burst": 7, "vip": 5}
    assert {m.kind for m in kept.moves} == {"spawn"}


def cold(waiting: int, known_job_s: float = 0.0) -> QueueStats:
    """A queue whose one slot idled through the whole window: no job done, no busy time."""
    return QueueStats(waiting_jobs=waiting, slot_lifetime_s=60.0, window_s=60.0, known_job_s=known_job_s)


def test_a_burst_into_a_cold_queue_takes_its_maximum_at_once() -> None:
    # Issue 28: no job time in the window read as one slot to learn from, and the burst
    # waited for a batch measured and reported (6.3 s with 20 ms jobs).
    current = one_host({"h:0": "burst", **{f"h:{n}": "bulk" for n in range(1, 10)}})
    for stats in (cold(4000), cold(4000, known_job_s=0.02)):
        assert bursting({}, {"burst": 4000}, QUEUES, current.counts()) == ["burst"]
        result = plan_burst(current, QUEUES, {"burst": stats}, [HostCapacity("h", 10)], ["burst"],
                            target_load=TARGET)
        assert result.slot_map.counts()["burst"] == 8
    # A few jobs are a burst of unknown length, sized on the assumption: no slot more.
    assert outlasts_noise(cold(10), 1)
    few = plan_burst(current, QUEUES, {"burst": cold(10)}, [HostCapacity("h", 10)], ["burst"],
                     target_load=TARGET)
    assert few.moves == ()
    assert job_time_s(cold(10)) == ASSUMED_JOB_S and job_time_s(cold(10), assume=False) is None


def test_job_times_are_remembered_past_the_window_and_a_measurement_wins() -> None:
    memory = JobTimeMemory()
    memory.seed({"a": 0.5, "b": float("nan")})
    seen = QueueStats(jobs_done=10, busy_s=2.0)
    filled = memory.fill({"q": seen, "a": cold(5), "b": cold(5)})
    assert filled["q"] == seen and filled["a"].known_job_s == 0.5 and filled["b"].known_job_s == 0.0
    assert memory.fill({"q": cold(7)})["q"].known_job_s == 0.2  # the window moved on
    memory.seed({"q": 9.0})  # the history's older figure does not replace this process's
    assert memory.fill({"q": cold(7)})["q"].known_job_s == 0.2


EQUALS = {q: QueueConfig(priority=2, min_slots=0, max_slots=4, batch_size=5) for q in ("a", "b", "c")}


def test_a_queue_with_jobs_and_no_slot_bursts_at_every_check_not_only_when_its_backlog_appeared() -> None:
    assert bursting({"c": 10}, {"c": 10}, EQUALS, {"a": 1, "b": 1}) == ["c"]
    assert bursting({"c": 10}, {"c": 10}, EQUALS, {"a": 1, "b": 1, "c": 1}) == []


def test_a_queue_with_no_slot_takes_one_idle_slot_of_an_equal_priority_and_no_busy_one() -> None:
    # A full host: a's queue is idle (nothing waiting, nothing running), b's is not; c waits.
    current = one_host({"h:0": "a", "h:1": "b"})
    stats = {"a": QueueStats(jobs_done=10, busy_s=2.0, slot_lifetime_s=60.0),
             "b": QueueStats(jobs_done=10, busy_s=2.0, slot_lifetime_s=60.0),
             "c": QueueStats(waiting_jobs=50)}
    hosts = [HostCapacity("h", 2)]
    result = plan_burst(current, EQUALS, stats, hosts, ["c"], target_load=TARGET, idle=["a"])
    assert result.slot_map.counts() == {"b": 1, "c": 1}
    assert [(m.kind, m.from_queue) for m in result.moves] == [("retarget", "a")]
    # No queue idle (b runs its last jobs): an equal priority gives nothing, as before.
    held = plan_burst(current, EQUALS, stats, hosts, ["c"], target_load=TARGET, idle=[])
    assert held.moves == ()
