"""A queue with a rate_limit: real master, real slots, real pulsar over ZeroMQ, real queue
server. Two slots together may not do more than the cluster-wide rate."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from config.models import RateLimitConfig
from queue_server.client import QueueClient
from slot.pulsar.service import PulsarService
from tests.queue_server.server_proc import running_queue_server, slotmap_command
from tests.queue_server.util import poll_until

RATE_PER_S = 20
JOBS = 60


def _free_tcp_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def test_two_slots_of_a_rate_limited_queue_share_one_cluster_wide_rate(tmp_path: Path) -> None:
    endpoint = _free_tcp_endpoint()
    service = PulsarService(endpoint, {"demo_noop": RateLimitConfig(permits=RATE_PER_S, period_s=1.0)})
    stopping = threading.Event()
    pulsar = threading.Thread(target=service.run_until, args=(stopping.is_set,), daemon=True)
    pulsar.start()
    ipc_dir = tempfile.mkdtemp(prefix="sm-rl-", dir="/tmp")
    with running_queue_server(tmp_path, "--fsync", "never") as server:
        config = tmp_path / "cluster.toml"
        config.write_text(
            f'[queue_server]\nlisten = "{server.address}"\n\n'
            f"[queues.demo_noop]\nbatch_size = 5\nlock_timeout_s = 60\n"
            f"rate_limit = {{ permits = {RATE_PER_S}, period_s = 1.0 }}\n\n"
            f'[master]\nipc_dir = "{ipc_dir}"\nstatic_slots = {{ demo_noop = 2 }}\n'
            f"max_load_per_cpu = 1000.0\n\n"
            f'[pulsar]\nlisten = "{endpoint}"\n'
        )
        master = subprocess.Popen([*slotmap_command(), "master", "--config", str(config)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  cwd=tmp_path, start_new_session=True, env=dict(os.environ))
        try:
            with QueueClient(server.address) as client:
                client.put("demo_noop", b"warm-up")
                poll_until(lambda: client.stats("demo_noop")["demo_noop"].done >= 1, 20.0,
                           what="the slots running")
                started = time.monotonic()
                client.put_many("demo_noop", [b"%d" % n for n in range(JOBS)])
                poll_until(lambda: client.stats("demo_noop")["demo_noop"].done >= JOBS + 1, 30.0,
                           what="every job done")
                elapsed_s = time.monotonic() - started
        finally:
            master.send_signal(signal.SIGTERM)
            master.wait(timeout=20)
            stopping.set()
            pulsar.join(timeout=5)
            service.close()
    # 60 jobs at 20/s need about 3 s (a small bucket may start them a little early);
    # without the limit two no-op slots finish them in a few milliseconds.
    assert elapsed_s >= (JOBS - 4) / RATE_PER_S * 0.9
