"""The manager's config reload (SIGHUP, issue 27 point 4) with a real manager, queue server,
master and database: a bad file changes nothing and says why; schedules added, changed and
removed take effect with no tick fired twice or lost; the new slot counts reach the master
with the next map. On 29606e0 the manager died of the SIGHUP."""
from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import server_proc
from test_schedules_procs import job_keys, tick_of
from test_service_procs import Cluster, Proc, WarmClusters, poll_until, wait_running

from manager.storage.store import EventKind
from queue_server.client import QueueClient

DEADLINE_S = 30.0


QUEUES = {"beats": {}, "gone": {}, "fresh": {}, "demo_noop": {"min_slots": 1, "max_slots": 1}}


@pytest.fixture(scope="module")
def warm_clusters(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  ) -> Iterator[WarmClusters]:
    yield from WarmClusters.started_now(request, "warm_cluster", tmp_path_factory.mktemp("config_reload"),
                                        QUEUES)


@pytest.fixture
def cluster(tmp_path: Path, warm_clusters: WarmClusters) -> Iterator[Cluster]:
    """A cluster of the test's own (its manager to be started); the next tests' start meanwhile."""
    yield from Cluster.with_queue_server(tmp_path, QUEUES)


@pytest.fixture
def warm_cluster(warm_clusters: WarmClusters, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """For a test whose first manager reads the queues only: started during the tests before."""
    yield from warm_clusters.one(request)


def reload(cluster: Cluster, manager: Proc, kind: str) -> float:
    """SIGHUP the manager and wait for its event of `kind`; that event's time."""
    before = len(cluster.events(kind))
    manager.process.send_signal(signal.SIGHUP)

    def seen() -> float | None:
        assert manager.alive(), f"the manager died of SIGHUP\n{cluster.logs()}"
        events = cluster.events(kind)
        return events[-1].at_unix if len(events) > before else None

    at = poll_until(seen, timeout_s=DEADLINE_S, what=lambda: f"a {kind} event\n{cluster.logs()}")
    assert at is not None
    return at


def marks(cluster: Cluster, config: Path) -> dict[str, str]:
    """`slotmap schedules --config FILE --json`: each schedule's mark where the manager differs."""
    done = subprocess.run([*server_proc.slotmap_command(), "schedules", "--config", str(config), "--json"],
                          capture_output=True, text=True, timeout=DEADLINE_S, cwd=cluster.root, check=True)
    return {row["name"]: row["manager_differs"] for row in json.loads(done.stdout)}


def ticks(cluster: Cluster, queue: str) -> list[float]:
    keys = job_keys(cluster.queue_server.address, queue)
    found = [tick_of(key) for key in keys]
    assert len(found) == len(set(found)), f"a tick of {queue} put twice: {sorted(keys)}"
    return sorted(found)


def wait_tick_after(cluster: Cluster, queue: str, moment: float) -> None:
    poll_until(lambda: any(t > moment for t in ticks(cluster, queue)), timeout_s=DEADLINE_S,
               what=lambda: f"a tick of {queue} after {moment}\n{cluster.logs()}")


def test_sighup_reloads_schedules_and_refuses_a_bad_file(cluster: Cluster) -> None:
    cluster.extra_sections = {
        "schedules.beat": {"every_s": 1.0, "queue": "beats"},
        "schedules.gone": {"every_s": 1.0, "queue": "gone"},
    }
    manager = cluster.start_manager("manager")
    path = cluster.root / "manager.toml"
    wait_tick_after(cluster, "beats", time.time())
    good = path.read_text()

    path.write_text(good + '\n[schedules.broken]\nevery_s = -5\nqueue = "beats"\n')
    reload(cluster, manager, EventKind.CONFIG_RELOAD_REFUSED)
    assert "config reload refused, nothing changed" in manager.log_text()
    refused = cluster.events(EventKind.CONFIG_RELOAD_REFUSED)[-1]
    assert "schedules.broken.every_s" in refused.message
    wait_tick_after(cluster, "gone", time.time())  # nothing changed: both still fire

    # beat every 2 s, gone removed, fresh added.
    cluster.extra_sections = {
        "schedules.beat": {"every_s": 2.0, "queue": "beats"},
        "schedules.fresh": {"every_s": 1.0, "queue": "fresh"},
    }
    cluster.config("manager")
    assert marks(cluster, path) == {"beat": "manager runs: every 1 s, queue beats",
                                    "fresh": "not running", "gone": "not in the file"}
    sent = time.time()
    changed_at = reload(cluster, manager, EventKind.CONFIG_RELOADED)
    reloaded = cluster.events(EventKind.CONFIG_RELOADED)[-1]
    assert {"schedules.fresh: added", "schedules.gone: removed",
            "schedules.beat.every_s: 1.0 -> 2.0"} <= set(reloaded.detail["applied"])
    wait_tick_after(cluster, "beats", changed_at + 4)
    wait_tick_after(cluster, "fresh", changed_at + 2)

    beats = ticks(cluster, "beats")
    # The schedule thread takes the new rules within its poll (0.25 s) of the event.
    taken = changed_at + 1.0
    old = [t for t in beats if t <= sent]
    new = [t for t in beats if t > taken]
    assert old == [float(t) for t in range(int(old[0]), int(old[-1]) + 1)], f"an old tick lost: {beats}"
    assert new and all(int(t) % 2 == 0 for t in new), f"a 1 s tick after the change: {beats}"
    assert new == [float(t) for t in range(int(new[0]), int(new[-1]) + 1, 2)], f"a new tick lost: {beats}"
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    assert set(gaps) <= {1.0, 2.0}, f"a tick lost across the change: {beats}"
    assert not [t for t in ticks(cluster, "gone") if t > taken], "a removed schedule fired"
    assert min(ticks(cluster, "fresh")) > sent - 1, "an added schedule fired ticks from before it"
    assert marks(cluster, path) == {"beat": "", "fresh": ""}  # gone: its row says nothing runs
    assert manager.alive()


def test_sighup_new_slot_counts_reach_the_master_with_the_next_map(warm_cluster: Cluster) -> None:
    manager = warm_cluster.start_manager("manager")
    master = warm_cluster.start_master("h1")
    wait_running(master, warm_cluster, {"demo_noop": 1}, timeout_s=DEADLINE_S)
    warm_cluster.queues["demo_noop"] = {"min_slots": 2, "max_slots": 2}
    path = warm_cluster.config("manager")  # the manager's file only: the master's own is unchanged
    # Asked through the database (`slotmap config-reload`), as from another host.
    asked = subprocess.run([*server_proc.slotmap_command(), "config-reload", "--config", str(path)],
                           capture_output=True, text=True, timeout=DEADLINE_S + 5, cwd=warm_cluster.root)
    assert asked.returncode == 0, asked.stderr
    assert "queues.demo_noop.min_slots: 1 -> 2" in asked.stdout
    wait_running(master, warm_cluster, {"demo_noop": 2}, timeout_s=DEADLINE_S)
    assert "queues.demo_noop.min_slots: 1 -> 2" in manager.log_text()
    # The queue server reloads nothing, and says so; it used to die of the SIGHUP (point 5).
    server = warm_cluster.queue_server
    server.process.send_signal(signal.SIGHUP)
    poll_until(lambda: "SIGHUP: the queue server reloads no settings" in server.log_text(),
               timeout_s=DEADLINE_S, what=lambda: f"the queue server's word\n{server.log_text()}")
    with QueueClient(server.address) as client:
        client.put("demo_noop", "{}")
        assert server.process.poll() is None and "demo_noop" in client.stats("demo_noop")


def test_sighup_new_queue_settings_reach_the_masters_slots(warm_cluster: Cluster) -> None:
    """Batch size, retries and limits are the slots' settings: a managed master takes them from
    the manager's reload (its own file is not read again), and tells its serving slots in place."""
    manager = warm_cluster.start_manager("manager")
    master = warm_cluster.start_master("h1")
    wait_running(master, warm_cluster, {"demo_noop": 1}, timeout_s=DEADLINE_S)
    report = master.report()
    assert report is not None and report.queues_version == ""
    before = report.queue_settings["demo_noop"].batch_size
    warm_cluster.queues["demo_noop"] = {"min_slots": 1, "max_slots": 1, "batch_size": before + 7,
                                   "max_attempts": 9}
    warm_cluster.config("manager")  # the manager's file only: the master's own is unchanged
    reload(warm_cluster, manager, EventKind.CONFIG_RELOADED)

    def in_force() -> str | None:
        found = master.report()
        settings = found.queue_settings.get("demo_noop") if found else None
        return found.queues_version if found and settings and settings.batch_size == before + 7 else None

    version = poll_until(in_force, timeout_s=DEADLINE_S, what=lambda: f"the new batch size\n{warm_cluster.logs()}")
    assert f"queue settings from the manager's config reload (version {version}): 1 serving slots told" \
        in master.log_text()
    # The same slot serves on (told in place, not re-forked), and jobs still get done.
    assert master.log_text().count("forked slot") == 1, master.log_text()
    with QueueClient(warm_cluster.queue_server.address) as client:
        client.put_many("demo_noop", [b"{}"] * 20)
        poll_until(lambda: client.stats("demo_noop")["demo_noop"].done >= 20, timeout_s=DEADLINE_S,
                   what=lambda: f"20 jobs done\n{warm_cluster.logs()}")
    # batch_size taken out of the file again: the handler class's counts, not the default 10
    # (the frames used to carry every key, so a key left out reached the master as written).
    warm_cluster.queues["demo_noop"] = {"min_slots": 1, "max_slots": 1, "max_attempts": 8}
    warm_cluster.config("manager")
    reload(warm_cluster, manager, EventKind.CONFIG_RELOADED)

    def class_value() -> str | None:
        found = master.report()
        settings = found.queue_settings.get("demo_noop") if found else None
        return settings.batch_size_source if settings and found and found.queues_version != version else None

    assert poll_until(class_value, timeout_s=DEADLINE_S, what=lambda: f"a new version\n{warm_cluster.logs()}") \
        == "handler"
    report = master.report()
    assert report is not None and report.queue_settings["demo_noop"].batch_size == before, report
