"""`slotmap schedules`: a last job whose state the queue server cannot tell is "unknown", and
stderr says why (before the audit branch only the word "unknown", without a reason)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from polling import DEADLINE_S
from procs import REPO_ROOT, free_port, slotmap_command, to_toml

from manager.schedules.state import ScheduleStates
from manager.storage.store import Store


def test_an_unknown_job_state_comes_with_the_reason_on_stderr(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'slotmap.db'}"
    away = f"127.0.0.1:{free_port()}"  # nobody listens there
    config = tmp_path / "cluster.toml"
    config.write_text(to_toml({
        "queue_server": {"listen": away},
        "manager": {"database_url": database},
        "schedules.pulse": {"every_s": 10, "queue": "reports"},
    }))
    store = Store.open(database)
    try:
        ScheduleStates(store.engine).fired("pulse", tick_ms=1000, key="pulse@1970-01-01T00:00:01Z", now_unix=2.0)
    finally:
        store.close()
    result = subprocess.run(
        [*slotmap_command(), "schedules", "--config", str(config), "--json"], cwd=tmp_path,
        capture_output=True, text=True, timeout=DEADLINE_S,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["last_job_state"] == "unknown"
    assert "1 last job state(s) unknown, the queue server did not say (pulse@1970-01-01T00:00:01Z: " in result.stderr
    assert away in result.stderr, result.stderr
