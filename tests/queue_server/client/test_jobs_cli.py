"""`slotmap jobs`, `job`, `retry`, `delete` as subprocesses against a real queue server."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from queue_server.client import QueueClient
from tests.queue_server.server_proc import (
    REPO_ROOT,
    ServerProc,
    refused_address,
    slotmap_command,
)

COMMAND_DEADLINE_S = 30.0
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "handlers.py", line 12, in handle\n'
    "    resize(job.data)\n"
    "ValueError: bad photo 7"
)


@pytest.fixture
def server(reused_queue_server) -> ServerProc:  # type: ignore[no-untyped-def]
    return reused_queue_server("--fsync", "never")  # type: ignore[no-any-return]


def slotmap(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([*slotmap_command(), *args], capture_output=True, text=True,
                          timeout=COMMAND_DEADLINE_S, env=env, check=False)


def make_dead(client: QueueClient, queue: str, key: str, data: bytes = b"photo-7.jpg") -> None:
    """Put a job under `key`, take it with its key, fail it as dead with a traceback."""
    assert client.put_job(queue, data, key=key).key == key
    [job] = client.get(queue, keys=True)
    assert (job.key, job.attempt) == (key, 1)
    assert client.fail(job.id, TRACEBACK, dead=True).dead


def make_failed(client: QueueClient, queue: str, key: str) -> float:
    """A failed job waiting for its retry; returns the server's next run time."""
    client.put_job(queue, b"later", key=key)
    [job] = client.get(queue, keys=True)
    result = client.fail(job.id, "TimeoutError: upstream took 30 s", delay_s=600)
    assert not result.dead and result.next_run_at is not None
    return result.next_run_at


def test_jobs_json_lists_the_dead_job_with_its_error_attempts_and_data(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        make_dead(client, "photos", "photo-7")
    result = slotmap("jobs", "photos", "--state", "dead", "--json", "--server", server.address)
    assert (result.returncode, result.stderr) == (0, "")
    [job] = json.loads(result.stdout)
    assert (job["key"], job["queue"], job["state"], job["attempts"]) == ("photo-7", "photos", "dead", 1)
    assert job["error"] == TRACEBACK
    assert job["data"] == "photo-7.jpg"
    assert job["died_at"] == pytest.approx(time.time(), abs=60)


def test_jobs_table_shows_the_errors_last_line_and_failed_jobs_their_next_run(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        make_dead(client, "photos", "photo-7")
        next_run = make_failed(client, "photos", "slow-1")
    dead = slotmap("jobs", "photos", "--state", "dead", "--server", server.address)
    assert dead.returncode == 0, dead.stderr
    header, row = dead.stdout.splitlines()
    assert header.split() == ["key", "attempts", "when", "error", "data"]
    assert row.startswith("photo-7") and "ValueError: bad photo 7" in row and "Traceback" not in row
    failed = slotmap("jobs", "photos", "--state", "failed", "--server", server.address)
    assert failed.returncode == 0, failed.stderr
    [row] = failed.stdout.splitlines()[1:]
    assert row.split()[:2] == ["slow-1", "1"]
    assert time.strftime("%Y-%m-%d %H:%M", time.gmtime(next_run)) in row
    empty = slotmap("jobs", "photos", "--state", "running", "--server", server.address)
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "slotmap jobs: photos: no running jobs\n")


def test_jobs_limit_pages_through_the_server(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        for n in range(5):
            make_dead(client, "photos", f"p{n}")
    first = json.loads(slotmap("jobs", "photos", "--state", "dead", "--json", "--limit", "3",
                               "--server", server.address).stdout)
    assert len(first) == 3
    rest = json.loads(slotmap("jobs", "photos", "--state", "dead", "--json", "--after", first[-1]["key"],
                              "--server", server.address).stdout)
    assert sorted(job["key"] for job in first + rest) == [f"p{n}" for n in range(5)]


def test_job_json_is_one_object_with_invalid_utf8_replaced(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        make_dead(client, "photos", "bin-1", data=b"\xff\xfeok")
    result = slotmap("job", "bin-1", "--json", "--server", server.address)
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert (job["key"], job["state"], job["data"], job["data_len"]) == ("bin-1", "dead", "\ufffd\ufffdok", 4)
    text = slotmap("job", "bin-1", "--server", server.address)
    assert "state: dead" in text.stdout and "    ValueError: bad photo 7" in text.stdout
    missing = slotmap("job", "nope", "--server", server.address)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == ("slotmap job: no job 'nope' (deleted, never put, or finished longer ago than its "
                              "queue keeps finished jobs: keep_done_s, keep_done_max)\n")


def test_job_shows_the_errors_of_its_last_attempts_and_json_carries_them(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        client.put_job("photos", b"p", key="flaky-1")
        for attempt in (1, 2, 3):
            [job] = client.get("photos", keys=True)
            assert job.attempt == attempt
            client.fail(job.id, f"OSError: disk full ({attempt})", delay_s=0)
    text = slotmap("job", "flaky-1", "--server", server.address)
    assert text.returncode == 0, text.stderr
    assert "errors of the last 3 failed attempts, oldest first:\n" in text.stdout
    for attempt in (1, 2, 3):
        assert f"  attempt {attempt} at " in text.stdout
        assert f"      OSError: disk full ({attempt})\n" in text.stdout
    job = json.loads(slotmap("job", "flaky-1", "--json", "--server", server.address).stdout)
    assert [(e["attempt"], e["error"]) for e in job["errors"]] == [
        (n, f"OSError: disk full ({n})") for n in (1, 2, 3)]


def test_retry_brings_a_dead_job_back_ready_with_attempts_reset(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        make_dead(client, "photos", "photo-7")
        result = slotmap("retry", "photos", "photo-7", "ghost", "--server", server.address)
        assert result.returncode == 1
        assert result.stdout == "retried 1 of 2 jobs\n"
        assert result.stderr == ("slotmap retry: ghost: not found in photos (deleted, never put, or finished "
                                 "longer ago than its queue keeps finished jobs)\n")
        info = client.job("photo-7")
        assert info is not None and (info.state, info.attempts) == ("ready", 0)
        [job] = client.get("photos", keys=True)
        assert (job.key, job.attempt, job.data) == ("photo-7", 1, b"photo-7.jpg")


def test_retry_all_and_delete_all_dead_empty_the_dead_set(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        for n in range(3):
            make_dead(client, "photos", f"p{n}")
        assert slotmap("retry", "photos", "--all", "--server", server.address).stdout == "retried 3 dead jobs\n"
        assert client.stats("photos")["photos"].ready == 3
        for job in client.get("photos", count=3, keys=True):
            client.fail(job.id, "again", dead=True)
        deleted = slotmap("delete", "photos", "--all-dead", "--server", server.address)
        assert (deleted.returncode, deleted.stdout) == (0, "deleted 3 dead jobs\n")
        assert client.jobs("photos", "dead") == []


def test_delete_by_key_refuses_a_running_job(server: ServerProc) -> None:
    with QueueClient(server.address) as client:
        make_dead(client, "photos", "photo-7")
        client.put_job("photos", b"busy", key="busy-1")
        client.get("photos", keys=True)
        result = slotmap("delete", "photos", "photo-7", "busy-1", "--server", server.address)
        assert (result.returncode, result.stdout) == (1, "deleted 1 of 2 jobs\n")
        assert result.stderr == "slotmap delete: busy-1: running\n"
        assert client.job("photo-7") is None
        running = client.job("busy-1")
        assert running is not None and running.state == "running"


@pytest.mark.parametrize(("args", "message"), [
    (("retry", "photos"), "slotmap retry: give one or more job keys, or --all"),
    (("retry", "photos", "k1", "--all"), "slotmap retry: give job keys or --all, not both"),
    (("delete", "photos"), "slotmap delete: give one or more job keys, or --all-dead"),
    (("delete", "photos", "k1", "--all-dead"), "slotmap delete: give job keys or --all-dead, not both"),
    (("job", "bad key"), "slotmap job: job key must be 1..128 characters of [A-Za-z0-9_.:@-], got 'bad key'"),
    (("jobs", "photos", "--limit", "0"), "slotmap jobs: --limit must be at least 1, got 0"),
    (("jobs", "bad queue!"), "slotmap jobs: "),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_is_sent(args: tuple[str, ...], message: str) -> None:
    with refused_address() as address:
        result = slotmap(*args, "--server", address)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


def test_an_unreachable_server_is_one_line_and_exit_1() -> None:
    with refused_address() as address:
        result = slotmap("jobs", "photos", "--server", address)
    assert result.returncode == 1
    assert result.stderr.startswith("slotmap jobs: ") and result.stderr.count("\n") == 1


def test_job_shows_a_finished_job_and_result_prints_its_result(server: ServerProc) -> None:
    with QueueClient(server.address, name="worker.7") as client:
        client.put("photos", b"photo-9.jpg", key="photo-9")
        [job] = client.get("photos", keys=True)
        assert client.done_with_result(job.id, '{"thumb": "photo-9-small.jpg"}').found
        client.put("photos", b"photo-10.jpg", key="photo-10")
    shown = slotmap("job", "photo-9", "--server", server.address)
    assert shown.returncode == 0, shown.stderr
    assert "state: done\n" in shown.stdout and "finished by: worker.7\n" in shown.stdout
    assert "runtime: " in shown.stdout and "started at: " in shown.stdout
    assert shown.stdout.endswith('result:\n    {"thumb": "photo-9-small.jpg"}\n')
    result = slotmap("result", "photos", "photo-9", "--server", server.address)
    assert (result.returncode, result.stdout) == (0, '{"thumb": "photo-9-small.jpg"}\n')
    waiting = slotmap("result", "photos", "photo-10", "--wait", "0.2", "--server", server.address)
    assert (waiting.returncode, waiting.stderr) == (1, "slotmap result: photo-10 is still ready after 0.2 s\n")
    listed = json.loads(slotmap("jobs", "photos", "--state", "done", "--json", "--server", server.address).stdout)
    assert [(job["key"], job["result"]) for job in listed] == [("photo-9", '{"thumb": "photo-9-small.jpg"}')]


def test_job_shows_the_host_and_slot_running_a_job(server: ServerProc) -> None:
    with QueueClient(server.address, name="slot.render-2.11") as client:
        client.put("photos", b"photo-11.jpg", key="photo-11")
        [job] = client.get("photos", keys=True)
        shown = slotmap("job", "photo-11", "--server", server.address)
        assert shown.returncode == 0, shown.stderr
        assert "state: running\n" in shown.stdout
        assert "running on: slot.render-2.11 (host render-2, slot 11)\n" in shown.stdout
        listed = json.loads(slotmap("jobs", "photos", "--state", "running", "--json", "--server",
                                    server.address).stdout)
        assert [(j["key"], j["running_host"], j["running_slot"]) for j in listed] == [("photo-11", "render-2", 11)]
        assert client.done(job.id)[0].found


def test_retry_and_delete_say_why_a_finished_or_running_job_was_left_alone(server: ServerProc) -> None:
    # Both said "<key>: not found" while `slotmap job <key>` showed the job done or running.
    with QueueClient(server.address) as client:
        client.put_job("photos", b"p", key="finished-1")
        [job] = client.get("photos", keys=True)
        assert client.done(job.id)[0].found
        client.put_job("photos", b"p", key="busy-2")
        [running] = client.get("photos", keys=True)
        retried = slotmap("retry", "photos", "finished-1", "busy-2", "--server", server.address)
        assert retried.returncode == 1 and retried.stdout == "retried 0 of 2 jobs\n"
        [finished, busy] = retried.stderr.splitlines()
        assert finished.startswith("slotmap retry: finished-1: already finished at ") and finished.endswith(
            " UTC: a finished job is not retried (put it again with its key to run it again)"), finished
        assert busy == ("slotmap retry: busy-2: running: only failed and dead jobs are retried "
                        "(slotmap cancel stops a running one)")
        deleted = slotmap("delete", "videos", "finished-1", "--server", server.address)
        assert deleted.returncode == 1
        assert deleted.stderr == "slotmap delete: finished-1: not found in videos (a job finished-1 is in photos)\n"
        deleted = slotmap("delete", "photos", "finished-1", "--server", server.address)
        assert "finished-1: already finished at " in deleted.stderr and deleted.stderr.endswith(
            ": a finished job is not deleted (kept until keep_done_s or keep_done_max drops it)\n")
        assert client.done(running.id)[0].found
