"""SIGHUP on a real `slotmap pulsar` (issue 27): it re-reads the queues' rate limits (added,
retuned, removed) and keeps serving; a bad file changes nothing. On 29606e0 it died of it."""
from __future__ import annotations

import signal
from pathlib import Path

from polling import DEADLINE_S, poll_until
from procs import free_port, kill_session, spawn_slotmap, to_toml

from slot.pulsar.client import PermitClient
from slot.pulsar.protocol import LimiterView


def write(path: Path, listen: str, limits: dict[str, dict[str, float]]) -> None:
    sections = {"pulsar": {"listen": listen},
                **{f"queues.{name}": {"rate_limit": {**limit, "margin": 0.0}} for name, limit in limits.items()}}
    path.write_text(to_toml(sections))


def test_sighup_reloads_the_limits_and_a_bad_file_changes_nothing(tmp_path: Path) -> None:
    listen = f"tcp://127.0.0.1:{free_port()}"
    config, log = tmp_path / "cluster.toml", tmp_path / "pulsar.log"
    write(config, listen, {"mail": {"permits": 10, "period_s": 1.0}, "sms": {"permits": 5, "period_s": 1.0}})
    pulsar = spawn_slotmap(["pulsar", "--config", str(config)], log_path=log, cwd=tmp_path)
    try:
        with PermitClient(listen, reply_timeout_s=DEADLINE_S) as client:
            def states() -> dict[str, LimiterView]:
                assert pulsar.poll() is None, log.read_text()
                return client.states()

            assert set(states()) == {"mail", "sms"}
            client.acquire("mail")
            config.write_text(config.read_text() + "\n[queues.bad]\nrate_limit = { permits = 0, period_s = 1.0 }\n")
            pulsar.send_signal(signal.SIGHUP)
            poll_until(lambda: "config reload refused" in log.read_text(), timeout_s=DEADLINE_S,
                       what=lambda: log.read_text())
            assert states()["mail"].configured_per_s == 10.0 and "bad" not in states()
            write(config, listen, {"mail": {"permits": 40, "period_s": 2.0}, "push": {"permits": 3, "period_s": 1.0}})
            pulsar.send_signal(signal.SIGHUP)
            poll_until(lambda: set(states()) == {"mail", "push"}, timeout_s=DEADLINE_S, what=lambda: log.read_text())
            after = states()
            assert after["mail"].configured_per_s == 20.0 and after["push"].configured_per_s == 3.0
            assert after["mail"].granted_total >= 1, "a retuned limiter keeps its counts"
            client.acquire("push")
            assert "mail: 10 per 1 s -> 40 per 2 s" in log.read_text()
    finally:
        kill_session(pulsar)
