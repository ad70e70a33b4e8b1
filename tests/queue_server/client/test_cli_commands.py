"""`slotmap put`, `slotmap get`, `slotmap stats` run as subprocesses against a real server."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from queue_server.client import QueueClient
from queue_server.protocol.replies import Total
from tests.queue_server.server_proc import (
    REPO_ROOT,
    ServerProc,
    refused_address,
    running_queue_server,
    slotmap_command,
)

COMMAND_DEADLINE_S = 30.0


@pytest.fixture
def server(reused_queue_server) -> ServerProc:  # type: ignore[no-untyped-def]
    return reused_queue_server("--fsync", "never")  # type: ignore[no-any-return]


def slotmap(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run(
        [*slotmap_command(), *args], input=stdin.decode(), capture_output=True, text=True,
        timeout=COMMAND_DEADLINE_S, env=env, check=False,
    )


def test_put_stores_the_job_with_priority_and_prints_its_key(server: ServerProc) -> None:
    result = slotmap("put", "q", "hello world", "--priority", "4", "--server", server.address)
    assert (result.returncode, result.stderr) == (0, "")
    with QueueClient(server.address) as client:
        [job] = client.get("q", keys=True)
    assert (job.data, job.priority, job.item) == (b"hello world", 4, None)
    assert result.stdout == f"{job.key}\n"


def test_put_with_new_item_prints_the_key_and_the_item_name(server: ServerProc) -> None:
    result = slotmap("put", "q", "x", "--new-item", "--server", server.address)
    assert result.returncode == 0
    with QueueClient(server.address) as client:
        [job] = client.get("q", keys=True)
    assert result.stdout == f"{job.key} {job.item}\n"
    assert job.item is not None and job.item.startswith("_")


def test_put_json_gives_the_key_and_a_taken_key_adds_nothing(server: ServerProc) -> None:
    first = slotmap("put", "q", "x", "--key", "order-7", "--json", "--server", server.address)
    assert json.loads(first.stdout) == {"key": "order-7", "queue": "q", "item": None, "existing_state": None,
                                        "existing_queue": None}
    again = slotmap("put", "q", "y", "--key", "order-7", "--json", "--server", server.address)
    assert json.loads(again.stdout)["existing_state"] == "ready"
    assert "nothing added: job order-7 exists (ready)\n" in again.stderr
    elsewhere = slotmap("put", "other", "y", "--key", "order-7", "--json", "--server", server.address)
    assert json.loads(elsewhere.stdout)["existing_queue"] == "q"
    assert "nothing added: job order-7 exists (ready) in queue q" in elsewhere.stderr
    plain = slotmap("put", "q", "z", "--json", "--server", server.address)
    assert json.loads(plain.stdout)["key"].startswith("_")


def test_put_into_a_queue_no_config_names_warns_and_still_puts(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text("[queues.thumbnails]\n")
    with running_queue_server(tmp_path, "--fsync", "never", "--config", str(config)) as configured:
        typo = slotmap("put", "thumbnail", "x", "--server", configured.address)
        assert typo.returncode == 0 and typo.stdout.strip().startswith("_")
        assert typo.stderr == (
            "slotmap put: warning: no config names queue 'thumbnail' ([queues.thumbnail] in the "
            "cluster config): no slot serves it, so the job waits until one does; check the name\n")
        right = slotmap("put", "thumbnails", "x", "--server", configured.address)
        assert (right.returncode, right.stderr) == (0, "")
        with QueueClient(configured.address) as client:
            assert client.stats("thumbnail")["thumbnail"].ready == 1


def test_put_dash_reads_the_data_from_stdin_and_delay_hides_it(server: ServerProc) -> None:
    result = slotmap("put", "q", "-", "--delay", "60", "--item", "batch7",
                     "--server", server.address, stdin=b"from\nstdin")
    assert result.returncode == 0, result.stderr
    with QueueClient(server.address) as client:
        assert client.get("q") == []
        assert client.stats("q")["q"].delayed == 1


def test_get_prints_queue_id_priority_item_and_escaped_data(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put("q", b"line1\nline2", priority=2, item="it")
        client.put("q", b"plain")
    result = slotmap("get", "q", "--count", "5", "--expire", "60", "--server", server.address)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    queue, job_id, priority, item, data = lines[0].split(" ", 4)
    assert (queue, priority, item, data) == ("q", "2", "it", "line1\\nline2")
    assert int(job_id) > 0
    assert lines[1].split(" ", 4)[2:] == ["0", "-", "plain"]
    with QueueClient(server.address) as client:
        assert client.total("q") == Total(1, 0, 0, 2)


def test_get_with_done_acknowledges_the_printed_jobs(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put("q", b"once")
    result = slotmap("get", "q", "--done", "--server", server.address)
    assert result.stdout.endswith(" once\n")
    with QueueClient(server.address) as client:
        assert client.total("q") == Total(0, 0, 0, 0)


def test_get_on_an_empty_queue_prints_nothing_and_says_so_on_stderr(server: ServerProc) -> None:
    result = slotmap("get", "empty", "--server", server.address)
    assert (result.returncode, result.stdout) == (0, "")
    assert "no job ready" in result.stderr


def test_stats_prints_a_table_with_a_row_per_queue(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put_many("alpha", [b"1", b"2", b"3"])
        client.put("beta", b"x", delay_s=60)
        client.get("alpha")
    result = slotmap("stats", "--server", server.address)
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["queue", "ready", "delayed", "running", "failed", "dead", "put", "done",
                              "later", "expired", "oldest", "age"]
    assert [row.split()[:10] for row in rows] == [
        ["alpha", "2", "0", "1", "0", "0", "3", "0", "0", "0"],
        ["beta", "0", "1", "0", "0", "0", "1", "0", "0", "0"],
    ]
    assert rows[1].split()[10] == "-"
    only_beta = slotmap("stats", "beta", "--server", server.address)
    assert [row.split()[0] for row in only_beta.stdout.splitlines()[1:]] == ["beta"]
    top = slotmap("stats", "--top", "1", "--server", server.address)  # the fullest, * the rest
    assert [row.split()[:4] for row in top.stdout.splitlines()[1:]] == [
        ["*", "0", "1", "0"], ["alpha", "2", "0", "1"]]


def test_stats_accounts_for_failed_and_dead_jobs(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put_many("q", [b"1", b"2", b"3"])
        first, second, _ = client.get("q", count=3, keys=True)
        client.fail(first.id, "boom", delay_s=3600)
        client.fail(second.id, "boom", dead=True)
    result = slotmap("stats", "q", "--server", server.address)
    header, row = result.stdout.splitlines()
    assert dict(zip(header.split()[:10], row.split()[:10], strict=True)) == {
        "queue": "q", "ready": "0", "delayed": "1", "running": "1", "failed": "1", "dead": "1",
        "put": "3", "done": "0", "later": "0", "expired": "0"}


def test_unreachable_server_gives_one_line_and_exit_code_1() -> None:
    with refused_address() as address:
        results = [slotmap(*args, "--server", address)
                   for args in (["put", "q", "x"], ["get", "q"], ["stats"])]
    for result in results:
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1
        assert "cannot reach a queue server" in result.stderr
        assert address in result.stderr


def test_repeated_server_options_fail_over_to_a_live_server(server: ServerProc) -> None:
    with refused_address() as dead:
        result = slotmap("put", "q", "x", "--server", dead, "--server", server.address)
    assert result.returncode == 0, result.stderr
    with QueueClient(server.address) as client:
        assert client.total("q").jobs == 1


def test_token_is_used_and_a_missing_one_fails_with_exit_code_1(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, "--fsync", "never", "--token", "tok") as secured:
        denied = slotmap("stats", "--server", secured.address)
        assert denied.returncode == 1
        assert "401" in denied.stderr
        allowed = slotmap("put", "q", "x", "--server", secured.address, "--token", "tok")
        assert allowed.returncode == 0, allowed.stderr


def test_a_bad_queue_name_is_a_usage_error_before_anything_is_sent(server: ServerProc) -> None:
    result = slotmap("put", "bad name", "x", "--server", server.address)
    assert result.returncode == 2
    assert "queue name" in result.stderr
    with QueueClient(server.address) as client:
        assert client.total() == Total(0, 0, 0, 0)
