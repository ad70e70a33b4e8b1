"""A config value of the wrong type stops every command that reads the file before it starts
anything: exit 2, one line naming the file, the key and the type expected (it used to be
coerced: `every_s = true` fired a schedule every second)."""
from __future__ import annotations

from pathlib import Path

import pytest
from procs import CliRun, free_port

EXIT_CONFIG_ERROR = 2
BAD = """\
[queue_server]
listen = "127.0.0.1:{queue_port}"

[queues.reports]
max_slots = true

[schedules.tick]
queue = "reports"
every_s = true
"""


@pytest.mark.parametrize("command", ["run", "queue-server", "manager", "master", "pulsar", "admin"])
def test_a_value_of_the_wrong_type_stops_the_command_before_it_starts_anything(
    slotmap: CliRun, tmp_path: Path, command: str,
) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text(BAD.format(queue_port=free_port()))
    result = slotmap(command, "--config", str(config), cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_CONFIG_ERROR, output
    assert "Traceback" not in output, output
    # "slotmap: config error: FILE: ..." ("slotmap queue-server: FILE: ..." from the queue server)
    assert (f": {config}: queues.reports.max_slots: expected an integer (such as 4), "
            "got true (a boolean); schedules.tick.every_s: expected a number (such as 5 or 2.5), "
            "got true (a boolean)\n") in result.stderr, output
    # `slotmap run` writes its children's logs under var/ before it starts the first one; the
    # others would make their data folder, database or sockets there (./var/... defaults).
    assert "started" not in result.stdout, output
    assert not (tmp_path / "var").exists(), sorted((tmp_path / "var").rglob("*"))
