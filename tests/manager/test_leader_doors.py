"""Issue 16 (one leader): real `slotmap manager` processes elect one active manager whatever
the spelling of the database URL, say when the database cannot be reached, and refuse
`--standby` on an in-memory database. Each test fails on f5016ee (said per test)."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import free_port, slotmap_command
from test_service_procs import REPO_ROOT, Cluster, Proc, poll_until
from test_store import PG_DSN

START_DEADLINE_S = 20.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from Cluster.with_queue_server(tmp_path, {"demo_noop": {"max_slots": 2}})


def start_manager_on(cluster: Cluster, name: str, database_url: str, *, standby: bool = False) -> Proc:
    cluster.database_url = database_url
    return cluster.start_manager(name, standby=standby)


def _active(proc: Proc) -> bool:
    return "active manager" in proc.log_text()


def test_two_managers_with_differently_spelled_urls_of_one_sqlite_file_elect_one(cluster: Cluster) -> None:
    """On f5016ee the second (sqlite+pysqlite through a symlinked folder, relative to its
    working folder) logged "holding the no lock (in-memory database)": two active managers."""
    (cluster.root / "var").mkdir()
    (cluster.root / "link").symlink_to(cluster.root / "var")
    first = start_manager_on(cluster, "manager-1", f"sqlite:///{cluster.root / 'var' / 'slotmap.db'}")
    poll_until(lambda: _active(first), timeout_s=START_DEADLINE_S,
               what=lambda: f"the first manager active\n{cluster.logs()}")
    second = start_manager_on(cluster, "manager-2", "sqlite+pysqlite:///link/slotmap.db", standby=True)
    poll_until(lambda: "standing by" in second.log_text(), timeout_s=START_DEADLINE_S,
               what=lambda: f"the second manager standing by\n{cluster.logs()}")
    assert not _active(second), cluster.logs()
    assert f", pid {first.pid})" in second.log_text()
    first.kill_group()
    poll_until(lambda: _active(second), timeout_s=START_DEADLINE_S,
               what=lambda: f"the second spelling taking over\n{cluster.logs()}")


@pytest.mark.skipif(not PG_DSN, reason="PostgreSQL not tested: set SLOTMAP_TEST_PG")
def test_two_managers_with_differently_spelled_postgresql_urls_elect_one(cluster: Cluster) -> None:
    assert PG_DSN is not None
    other = PG_DSN.replace("127.0.0.1", "localhost") if "127.0.0.1" in PG_DSN else PG_DSN
    first = start_manager_on(cluster, "manager-1", PG_DSN)
    poll_until(lambda: _active(first), timeout_s=START_DEADLINE_S,
               what=lambda: f"the first manager active\n{cluster.logs()}")
    second = start_manager_on(cluster, "manager-2", other, standby=True)
    poll_until(lambda: "standing by" in second.log_text(), timeout_s=START_DEADLINE_S,
               what=lambda: f"the second manager standing by\n{cluster.logs()}")
    assert not _active(second), cluster.logs()


def test_a_standby_whose_postgresql_cannot_be_reached_says_so(cluster: Cluster) -> None:
    """On f5016ee it logged "another manager is active; standing by" after the warning."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/slotmap"
    standby = start_manager_on(cluster, "manager", url, standby=True)
    poll_until(lambda: "cannot reach the database" in standby.log_text(),
               timeout_s=START_DEADLINE_S, what=lambda: f"the unreachable database reported\n{cluster.logs()}")
    assert "another manager is active" not in standby.log_text()
    assert standby.alive()


def test_a_standby_whose_sqlite_folder_cannot_be_opened_says_so_then_takes_over(cluster: Cluster) -> None:
    """On f5016ee the manager died on an uncaught FileExistsError (a traceback)."""
    blocker = cluster.root / "mount"
    blocker.write_text("not a folder: the database's mount is missing")
    standby = start_manager_on(cluster, "manager", f"sqlite:///{blocker / 'slotmap.db'}", standby=True)
    poll_until(lambda: "cannot reach the database" in standby.log_text(),
               timeout_s=START_DEADLINE_S, what=lambda: f"the unreachable database reported\n{cluster.logs()}")
    assert "another manager is active" not in standby.log_text()
    assert standby.alive()
    blocker.unlink()
    poll_until(lambda: _active(standby), timeout_s=START_DEADLINE_S,
               what=lambda: f"active once the folder can be made\n{cluster.logs()}")


def test_standby_on_an_in_memory_database_is_refused(tmp_path: Path) -> None:
    """On f5016ee there was no --standby (argparse exit 2 with a usage message instead)."""
    config = tmp_path / "cluster.toml"
    config.write_text(f'[manager]\nlisten = "tcp://127.0.0.1:{free_port()}"\ndatabase_url = "sqlite://"\n')
    result = subprocess.run([*slotmap_command(), "manager", "--config", str(config), "--standby"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 2, result.stderr
    assert "--standby with an in-memory database" in result.stderr
