"""Finished jobs and their results through real slots (issue 26 points 2 and 3): a handler's
return value or job.result() is kept with the finished job, `client.result()` waits for it in
the server, the finished job names the slot that ran it, and it survives a restart."""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from master_procs import ServerFor, StartMaster, poll_until

from queue_server.client import JobNotFinished, NoResult, QueueClient

QUEUES = {"results_sum": {"max_result_bytes": 1024}}
HUGER_BYTES = 2 * 1024 * 1024  # over the queue server's default max_job_bytes


def test_a_handlers_return_value_is_the_jobs_result_and_result_waits_for_it(
        start_master: StartMaster, queue_server_for: ServerFor, tmp_path: Path) -> None:
    flag = tmp_path / "let-it-finish"
    queue_server = queue_server_for(QUEUES)
    with QueueClient(queue_server.address) as client:
        client.put("results_sum", json.dumps({"numbers": [1, 2, 3]}), key="s1")
        client.put("results_sum", json.dumps({"explicit": True}), key="s2")
        client.put("results_sum", json.dumps({"huge": True}), key="s3")
        client.put("results_sum", json.dumps({"numbers": [40, 2], "wait_for": str(flag)}), key="s4")
        master = start_master(modules=["sm_test_results"], static_slots={"results_sum": 1},
                              queues=QUEUES, server=queue_server)
        # Waits in the server while the job runs: no answer before the flag, the sum after.
        waited: dict[str, Any] = {}

        def wait() -> None:
            with QueueClient(queue_server.address) as waiter:
                waited["result"] = waiter.result("results_sum", "s4", timeout=60.0)

        thread = threading.Thread(target=wait)
        thread.start()
        poll_until(lambda: (info := client.job("s4")) is not None and info.state == "running",
                   timeout_s=60.0, what=lambda: f"s4 running\n{master.log_tail()}")
        assert "result" not in waited
        with pytest.raises(JobNotFinished) as not_yet:
            client.result("results_sum", "s4", timeout=0.2)
        assert not_yet.value.info.state == "running" and not_yet.value.info.started_at is not None
        flag.touch()
        thread.join(timeout=60.0)
        assert json.loads(waited["result"])["sum"] == 42

        assert json.loads(client.result("results_sum", "s1") or "")["sum"] == 6
        assert client.result("results_sum", "s2") == "explicit bytes"
        with pytest.raises(NoResult, match=r"over its queue's max_result_bytes|not kept"):
            client.result("results_sum", "s3")
        s1 = client.job("s1")
        assert s1 is not None and s1.state == "done" and s1.attempts == 1
        assert s1.ran_by is not None and re.fullmatch(r"slot\.[A-Za-z0-9_.:-]+\.[0-9]+", s1.ran_by)
        assert s1.started_at is not None and s1.done_at is not None and s1.runtime_s is not None
        assert s1.started_at <= s1.done_at and s1.data == json.dumps({"numbers": [1, 2, 3]})
        listed = client.jobs("results_sum", "done")
        assert [info.key for info in listed] == ["s4", "s3", "s2", "s1"]  # newest first
        with pytest.raises(NoResult):
            client.result("results_sum", "never-put")
        with pytest.raises(NoResult):  # a key of another queue is not this queue's
            client.result("other_queue", "s1")
        # Over the server's max_job_bytes (1 MiB) the result cannot be sent: it finished all the
        # same, and says how large its result was rather than looking as if it returned None.
        client.put("results_sum", json.dumps({"huger": HUGER_BYTES}), key="s5")
        with pytest.raises(NoResult, match=f"{HUGER_BYTES} bytes"):
            client.result("results_sum", "s5", timeout=60.0)
        s5 = client.job("s5")
        assert s5 is not None and (s5.state, s5.result, s5.result_len, s5.result_kept) == (
            "done", None, HUGER_BYTES, False)
