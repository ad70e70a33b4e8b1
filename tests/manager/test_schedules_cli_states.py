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


def test_the_table_columns_fit_their_longest_value(tmp_path: Path) -> None:
    """A cron in a long time zone, a long schedule and queue name, and a last job key (the
    schedule's name and a tick time) each widen their column: nothing is cut, every row's
    values start under their column's heading."""
    database = f"sqlite:///{tmp_path / 'slotmap.db'}"
    config = tmp_path / "cluster.toml"
    config.write_text(to_toml({
        "queue_server": {"listen": f"127.0.0.1:{free_port()}"},  # nobody listens: state unknown
        "manager": {"database_url": database},
        "schedules.nightly_invoice_reminders": {"cron": "30 2 * * 1-5", "timezone": "America/Argentina/Buenos_Aires",
                                                "queue": "invoice_reminders_eu_west"},
        "schedules.pulse": {"every_s": 10, "queue": "reports"},
    }))
    key = "nightly_invoice_reminders@2026-11-25T05:30:00Z"
    store = Store.open(database)
    try:
        ScheduleStates(store.engine).fired("nightly_invoice_reminders", tick_ms=1000, key=key, now_unix=2.0)
    finally:
        store.close()
    result = subprocess.run(
        [*slotmap_command(), "schedules", "--config", str(config)], cwd=tmp_path,
        capture_output=True, text=True, timeout=DEADLINE_S,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    # No manager ever ran: each row ends "[not running]" and a footnote says why.
    assert rows[-1].startswith("[...]: the active manager runs otherwise")
    rows = rows[:-1]
    headings = ["schedule", "queue", "rule", "next fire (UTC)", "last job", "state"]
    starts = [header.index(heading) for heading in headings]
    assert starts == sorted(starts)
    expected = {
        "nightly_invoice_reminders": ["nightly_invoice_reminders", "invoice_reminders_eu_west",
                                      "cron 30 2 * * 1-5 (America/Argentina/Buenos_Aires)", None, key,
                                      "unknown  [not running]"],
        "pulse": ["pulse", "reports", "every 10 s", None, "-", "-  [not running]"],
    }
    assert sorted(row.split()[0] for row in rows) == sorted(expected)
    for row in rows:
        cells = [row[start:end].strip() for start, end in zip(starts, [*starts[1:], None], strict=True)]
        assert all(row[start - 1] == " " for start in starts[1:]), row  # no value runs into the next column
        wanted = expected[cells[0]]
        assert [cell for cell, want in zip(cells, wanted, strict=True) if want is not None] == [
            want for want in wanted if want is not None], row
        assert len(cells[3]) == len("2026-11-29 10:00:00"), row  # the next fire, whole
