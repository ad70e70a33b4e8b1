"""A master whose queue server wants a token kept in a file: its slots and its lease keeper
authenticate with it (the token never on a command line)."""
from __future__ import annotations

import json
from pathlib import Path

from master_procs import StartMaster, poll_until
from procs import server_proc

from queue_server.client import QueueClient

TOKEN = "s3cret-token-for-the-test"


def test_slots_of_a_master_use_the_token_file_of_the_config(start_master: StartMaster, tmp_path: Path) -> None:
    token_file = tmp_path / "queue.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    log = tmp_path / "runs.log"
    with server_proc.running_queue_server(tmp_path, "--fsync", "never", "--token-file", str(token_file)) as server:
        master = start_master(modules=["sm_test_outcomes"], static_slots={"outcomes_one_by_one": 1},
                              server=server, server_settings={"token_file": str(token_file)})
        with QueueClient(server.address, token=TOKEN) as client:
            client.put(
                "outcomes_one_by_one", json.dumps({"log": str(log), "n": 0, "do": "ok"}), key="tok-0"
            )
            poll_until(lambda: log.exists() and "done " in log.read_text(),
                       what=lambda: f"the job done\n{master.log_tail()}")
