"""A blocking GET given `check_s` (a slot's fetch, queue_server/client/follow.py WAIT_CHECK_S),
with two real standalone queue servers in the client's list: while no reply comes, the
client asks the waited-on server for a PING on a new connection every `check_s`.

- A server that answers keeps the wait as it was: the same connection, the same place in
  the server's first-come first-served line of waiters (a wait given up and asked again
  would queue behind a later one).
- A server that does not answer (SIGSTOP: its kernel still accepts and keeps the
  connection) has the wait given up, and the GET goes to the server found anew. Before,
  the wait stayed on the frozen server until it thawed.
- A slot's fetch woken (a stop, a retarget) while its server is frozen ends within seconds,
  as an idle one leaves it. Before, the woken wait read the frozen server's tail for the
  client's 30 s (then raised SourceUnavailable, not the wake).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psutil

from queue_server.client import QueueClient
from slot.source import ClientSource
from slot.wake import Waker
from tests.queue_server.server.ha import frozen
from tests.queue_server.server_proc import running_queue_server
from tests.queue_server.util import poll_until

FAST = ("--fsync", "never")
CHECK_S = 0.2
# A live server answers the check at once; a generous budget keeps a loaded machine's
# unscheduled seconds from reading as a frozen server.
PATIENT_CONNECT_S = 20.0
# From the freeze to the job fetched from the other server: the check (0.2 s), its PING
# unanswered (connect_timeout_s, 3 s), the tail read (0.5 s), the reconnect's handshake
# with the frozen server (3 s); with room for a loaded machine.
MOVED_WITHIN_S = 25.0
# From the wake to the fetch's end: the tail read (0.5 s), a PING unanswered
# (connect_timeout_s, 3 s); with room for a loaded machine, well under the client's 30 s.
WOKEN_WITHIN_S = 15.0


def _in_thread(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except Exception as exc:  # the test reports it: noqa: BLE001
            out["error"] = exc
        out["ended_at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_checked_wait_on_a_live_server_keeps_its_connection_and_place(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST) as first, running_queue_server(tmp_path, *FAST) as other, \
            QueueClient([first.address, other.address], connect_timeout_s=PATIENT_CONNECT_S) as checked, \
            QueueClient(first.address) as later, QueueClient(first.address) as producer:
        checked.ping()
        assert checked.address == ("127.0.0.1", first.port)
        started = time.monotonic()
        waiting, out = _in_thread(lambda: checked.get("q", block=True, keys=True, check_s=CHECK_S))
        # The point of the test: the first wait goes through several checks before the second one.
        poll_until(lambda: time.monotonic() - started > 10 * CHECK_S, what="checks passing")
        assert waiting.is_alive(), out
        behind, behind_out = _in_thread(lambda: later.get("q", block=True, keys=True))
        producer.put("q", b"first in line", key="one")
        waiting.join(timeout=30)
        assert [job.key for job in out.get("value", [])] == ["one"], out
        assert checked.address == ("127.0.0.1", first.port)
        assert behind.is_alive(), behind_out  # it queued behind: nothing for it yet
        producer.put("q", b"second in line", key="two")
        behind.join(timeout=30)
        assert [job.key for job in behind_out.get("value", [])] == ["two"], behind_out


def test_a_wait_on_a_frozen_server_is_given_up_for_the_server_found_anew(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST) as first, running_queue_server(tmp_path, *FAST) as other, \
            QueueClient([first.address, other.address]) as checked, \
            QueueClient(other.address) as producer:
        checked.ping()
        assert checked.address == ("127.0.0.1", first.port)
        waiting, out = _in_thread(lambda: checked.get("q", block=True, keys=True, check_s=CHECK_S,
                                                      until=time.monotonic() + 60.0))
        with frozen(first):
            frozen_at = time.monotonic()
            producer.put("q", b"on the other server", key="moved")
            waiting.join(timeout=MOVED_WITHIN_S + 15)
            still_frozen = psutil.Process(first.process.pid).status() == psutil.STATUS_STOPPED
        assert [job.key for job in out.get("value", [])] == ["moved"], out
        assert still_frozen, "the job came only after the thaw"
        assert out["ended_at"] - frozen_at < MOVED_WITHIN_S, f"{out['ended_at'] - frozen_at:.1f} s"
        assert checked.address == ("127.0.0.1", other.port)
        info = producer.job("moved")
        assert info is not None and (info.state, info.attempts) == ("running", 1), info


def test_a_fetch_woken_while_its_server_is_frozen_ends_within_seconds(tmp_path: Path) -> None:
    waker = Waker()
    try:
        with running_queue_server(tmp_path, *FAST) as first, running_queue_server(tmp_path, *FAST) as other, \
                QueueClient([first.address, other.address]) as slot:
            source = ClientSource(slot, waker)
            fetching, out = _in_thread(lambda: source.fetch("q", count=1, lock_s=60.0))
            # Connected for the fetch: past its look at the waker, GETB on its way.
            poll_until(lambda: slot.address is not None, what="GETB sent")
            assert slot.address == ("127.0.0.1", first.port)
            with frozen(first):
                woken_at = time.monotonic()
                waker.wake()
                fetching.join(timeout=WOKEN_WITHIN_S + 30)
                still_frozen = psutil.Process(first.process.pid).status() == psutil.STATUS_STOPPED
        assert "error" not in out and out.get("value", []) is None, out
        assert still_frozen, "ended only after the thaw"
        assert out["ended_at"] - woken_at < WOKEN_WITHIN_S, f"{out['ended_at'] - woken_at:.1f} s"
    finally:
        waker.close()
