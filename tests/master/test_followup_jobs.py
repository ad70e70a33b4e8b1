"""A handler puts a follow-up job through its slot's connection; a parent that fails and runs
again puts no second child when the child's key is derived from the parent's (issue 18)."""
from __future__ import annotations

import json
from pathlib import Path

from master_procs import ServerFor, StartMaster, poll_until

from queue_server.client import QueueClient

SETTINGS = {"max_attempts": 3, "retry_base_s": 0.2, "retry_max_s": 1.0}


def test_a_retried_parent_puts_its_child_once(
    queue_server_for: ServerFor, start_master: StartMaster, tmp_path: Path,
) -> None:
    server = queue_server_for({"followup_resize": SETTINGS})
    with QueueClient(server.address) as client:
        client.put("followup_resize", json.dumps({"image": "cat.png"}), key="resize-cat")
    master = start_master(modules=["sm_test_followup"], static_slots={"followup_resize": 1},
                          queues={"followup_resize": SETTINGS}, server=server)
    client = master.client()

    def parent_done() -> bool:
        master.assert_alive()
        parent = client.job("resize-cat")  # kept once finished (issue 26)
        return parent is not None and parent.state == "done" and \
            client.stats("followup_resize")["followup_resize"].done == 1

    poll_until(parent_done, timeout_s=30.0, what=lambda: f"the parent done\n{master.log_tail()}")
    # The parent ran twice: its first attempt failed after putting the child.
    assert client.stats("followup_resize")["followup_resize"].failed_total == 1
    children = client.jobs("followup_notify", "ready")
    assert [child.key for child in children] == ["resize-cat:notify"]
    assert json.loads(children[0].data) == {"image": "cat.png", "size": "small"}
