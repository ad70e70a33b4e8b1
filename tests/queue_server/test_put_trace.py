"""PUT ... TRACE <traceparent> (issue 26 point 6): the producer's W3C trace context is kept
with the job byte for byte, shown to `GET ... KEYS TRACES` at every hand-out (after LATER
and FAIL too) and to nobody else, refused when malformed, and kept by the log, snapshots
and a replica. Real server processes."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from polling import DEADLINE_S
from util import poll_until

from queue_server.client import QueueClient

TRACE = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _traced(server) -> set[bytes]:  # type: ignore[no-untyped-def]
    """The keys of the jobs whose SNAPSHOT record carries TRACE."""
    raw = server.connect()
    raw.send(b"SNAPSHOT\r\n")
    blob = raw.exact(int(raw.line().split()[2]))
    return {key for key, trace in re.findall(rb"SYNC PUT [^\r\n]* KEY (\S+) [^\r\n]*TRACE (\S+)\r\n", blob)
            if trace == TRACE}


def test_a_trace_is_shown_to_traces_requests_only_at_every_hand_out(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never")
    raw = server.connect()
    raw.send(b"PUT q 0 1 TRACE " + TRACE + b" KEY t\r\nx")
    assert raw.line() == b"200 OK KEY t"
    # A plain sockPQd GET and a KEYS GET see no trace.
    raw.send(b"GET q\r\n")
    first = raw.line()
    assert first.startswith(b"200 OK q ") and b"TRACE" not in first
    raw.exact(1)
    assert raw.request(b"LATER " + first.split()[3]) == b"200 OK"
    raw.send(b"PUT q 0 1 KEY plain\r\ny")
    assert raw.line() == b"200 OK KEY plain"
    raw.send(b"GET q KEYS\r\n")
    keyed = raw.line()
    assert keyed.endswith(b" KEY t ATTEMPT 1") and b"TRACE" not in keyed
    raw.exact(1)
    job_id = keyed.split()[3]
    raw.send(b"FAIL " + job_id + b" DELAY 0 4\r\nboom")
    assert raw.line().startswith(b"200 OK RETRY")
    # After a LATER and a FAIL the job still carries its trace; the plain job has none.
    raw.send(b"GET q COUNT 2 KEYS TRACES\r\n")
    assert raw.line() == b"200 OK 2 JOBS"
    by_key = {}
    for _ in range(2):
        header = raw.line()
        raw.exact(1)
        by_key[header.split()[5]] = header.split(b" ", 4)[4]  # after `<q> <id> <p> <len>`
    assert by_key == {b"t": b"KEY t ATTEMPT 2 TRACE " + TRACE, b"plain": b"KEY plain ATTEMPT 1"}
    # The client reads it back.
    with QueueClient(f"127.0.0.1:{server.port}") as client:
        client.put("r", b"z", key="z")
        raw.send(b"PUT r 0 1 TRACE " + TRACE + b"\r\nw")
        assert raw.line() == b"200 OK"
        jobs = client.get("r", count=2, keys=True, traces=True)
        assert [(job.data, job.trace) for job in jobs] == [(b"z", None), (b"w", TRACE.decode())]


def test_a_malformed_trace_is_refused_and_nothing_is_stored(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never")
    raw = server.connect()
    bad = [
        b"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # another version
        b"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
        b"00-00000000000000000000000000000000-b7ad6b7169203331-01",  # invalid trace id
        b"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # invalid span id
        b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        b"x" * 4000,
    ]
    for value in bad:
        raw.send(b"PUT q 0 1 TRACE " + value + b"\r\nx")
        reply = raw.line()
        assert reply.startswith(b"400 Bad Request: TRACE must be a W3C traceparent"), reply
    raw.send(b"GETB q KEYS TRACES TRACES\r\n")
    assert raw.line() == b"400 Bad Request: TRACES given twice"
    raw.send(b"GET q TRACES\r\n")
    assert raw.line() == b"400 Bad Request: TRACES needs KEYS"
    assert raw.request(b"TOTAL q").startswith(b"200 OK 0 ")


def test_the_trace_survives_the_log_a_snapshot_and_replication(start_queue_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data_dir = tmp_path / "trace-data"
    server = start_queue_server("--fsync", "always", data_dir=data_dir)
    replica = start_queue_server("--fsync", "never", "--replica-of", f"127.0.0.1:{server.port}",
                                 "--server-id", "2", "--promote-after", "60")
    raw = server.connect()
    for key, delay in ((b"ready", b""), (b"later", b" DELAY 3600"), (b"running", b"")):
        raw.send(b"PUT q 0 1 KEY %s TRACE %s%s\r\nx" % (key, TRACE, delay))
        assert raw.line() == b"200 OK KEY " + key
    raw.send(b"GET q KEYS\r\n")  # "ready" runs now
    assert raw.line().endswith(b"KEY ready ATTEMPT 1")
    raw.exact(1)
    expected = {b"ready", b"later", b"running"}
    poll_until(lambda: _traced(replica) == expected, timeout_s=DEADLINE_S,
               what="the replica holding every job's trace")
    server.kill()  # recovery replays the log
    server = start_queue_server("--fsync", "always", data_dir=data_dir)
    assert _traced(server) == expected
    raw = server.connect()
    assert raw.request(b"SHUTDOWN") == b"221 Shutting Down"
    server = start_queue_server("--fsync", "always", data_dir=data_dir)  # from the snapshot
    raw = server.connect()
    raw.send(b"GET q COUNT 5 KEYS TRACES\r\n")
    assert raw.line() == b"200 OK 2 JOBS"
    for _ in range(2):
        assert raw.line().endswith(b" TRACE " + TRACE)
        raw.exact(1)


_WITHOUT_OTEL = r"""
import sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("not installed")
        return None

if sys.argv[1] == "absent":
    sys.meta_path.insert(0, Absent())
from queue_server.client import tracing
from queue_server.protocol import requests as req
from slot.handler import SlotJob
assert "opentelemetry" not in sys.modules, "imported at module import time"
assert tracing.INSTALLED is (sys.argv[1] == "installed")
if sys.argv[1] == "absent":
    assert tracing.current_traceparent() is None and not tracing.enabled()
    with SlotJob("q", 1, 0, b"", None, "k", 1, trace="00-" + "1" * 32 + "-" + "2" * 16 + "-01").span() as span:
        assert span is None
    assert "opentelemetry" not in sys.modules
print("ok")
"""


def test_opentelemetry_is_imported_only_when_used_and_never_when_absent() -> None:
    repo = Path(__file__).resolve().parents[2]
    for mode in ("absent", "installed"):
        out = subprocess.run([sys.executable, "-c", _WITHOUT_OTEL, mode], cwd=repo,
                             capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stdout.strip()) == (0, "ok"), (mode, out.stderr[-2000:])


def test_a_dead_job_keeps_its_trace_through_a_restart_and_a_retry(start_queue_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data_dir = tmp_path / "dead-trace"
    server = start_queue_server("--fsync", "always", data_dir=data_dir)
    raw = server.connect()
    raw.send(b"PUT q 0 1 KEY d TRACE " + TRACE + b"\r\nx")
    assert raw.line() == b"200 OK KEY d"
    raw.send(b"GET q KEYS\r\n")
    job_id = raw.line().split()[3]
    raw.exact(1)
    raw.send(b"FAIL " + job_id + b" DEAD 4\r\nboom")
    assert raw.line() == b"200 OK DEAD"
    server.kill()  # the log's SYNC FAIL ... DEAD replayed
    server = start_queue_server("--fsync", "always", data_dir=data_dir)
    raw = server.connect()
    assert raw.request(b"SHUTDOWN") == b"221 Shutting Down"
    server = start_queue_server("--fsync", "always", data_dir=data_dir)  # SYNC DEAD ... TRACE
    raw = server.connect()
    raw.send(b"SNAPSHOT\r\n")
    blob = raw.exact(int(raw.line().split()[2]))
    assert re.search(rb"SYNC DEAD q 0 \d+ KEY d [^\r\n]* TRACE " + TRACE + rb"\r\n", blob), blob
    assert raw.request(b"RETRY q d") == b"200 OK"
    raw.send(b"GET q KEYS TRACES\r\n")
    assert raw.line().endswith(b" KEY d ATTEMPT 1 TRACE " + TRACE)


def test_job_and_jobs_show_the_trace(reused_queue_server) -> None:  # type: ignore[no-untyped-def]
    server = reused_queue_server("--fsync", "never")
    raw = server.connect()
    raw.send(b"PUT q 0 1 KEY t TRACE " + TRACE + b"\r\nx")
    assert raw.line() == b"200 OK KEY t"
    with QueueClient(f"127.0.0.1:{server.port}") as client:
        client.put("q", b"y", key="plain")
        assert [(job.key, job.trace) for job in client.jobs("q", "ready")] == [
            ("t", TRACE.decode()), ("plain", None)]
        [running] = client.get("q", keys=True)
        info = client.job("t")
        assert info is not None and (info.state, info.trace) == ("running", TRACE.decode())
        client.fail(running.id, "boom", dead=True)
        info = client.job("t")
        assert info is not None and (info.state, info.trace) == ("dead", TRACE.decode())
