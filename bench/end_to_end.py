"""End to end: no-op jobs through 2 workers, Slotmap against Celery and Dramatiq in the same run.

Throughput: --jobs no-op jobs (20,000) from the first enqueue to the last completion,
workers started and idle beforehand. Slotmap: 2 slots, batch_size 100, the queue
server with --fsync never; completion = the server has no job left (last DONE).
Celery 5 (prefork, concurrency 2) and Dramatiq (2 processes, default threads) on
the Redis at 127.0.0.1:6379; completion = each task sends one UDP datagram to this
process (a counted completion, not a dequeue).

Latency: with idle workers, one job at a time, from just before PUT/send to the
start of the handler (time.time() in the job, read by the handler), --samples times.

Failing jobs (--fail-percent 1, Slotmap only): the same run where that share of the jobs
is failed by the handler with `job.fail()` (max_attempts 3, retry_base_s 0.2, retry_max_s 1):
the time until every good job is done beside the all-good run, and until every failing job
is dead. --fsync may be given twice (never, always) to run Slotmap under each.

Usage: .venv/bin/python bench/end_to_end.py [--jobs 20000] [--samples 300] [--only slotmap]
       .venv/bin/python bench/end_to_end.py --only slotmap --fsync never --fsync always --fail-percent 1
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from queue_server.client import QueueClient  # noqa: E402

VENV_BIN = Path(sys.executable).parent
REDIS_URL = "redis://127.0.0.1:6379/0"
START_DEADLINE_S = 30.0
RUN_DEADLINE_S = 300.0

SLOT_HANDLERS = '''
import os, socket, time
from slot.handler import Handler, handler

_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_to = ("127.0.0.1", int(os.environ["BENCH_UDP_PORT"]))


@handler("bench_e2e")
class Bench(Handler):
    batch_size = 100

    def handle(self, jobs):
        now = time.time()
        for job in jobs:
            if job.data == b"fail":  # the failing share of --fail-percent
                job.fail("bench: this payload always fails")
            elif job.data == b"good":
                _udp.sendto(b"1", _to)
            elif job.data:  # a latency probe: report how long after its PUT the handler began
                _udp.sendto(b"%.6f" % (now - float(job.data)), _to)
'''

CELERY_TASKS = '''
import os, socket, time
from celery import Celery

app = Celery("sm_bench", broker="{redis}")
app.conf.update(
    task_ignore_result=True, task_default_queue="{queue}", worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_to = ("127.0.0.1", int(os.environ["BENCH_UDP_PORT"]))


@app.task
def noop(sent_at=None):
    _udp.sendto(b"1" if sent_at is None else b"%.6f" % (time.time() - sent_at), _to)
'''

DRAMATIQ_ACTORS = '''
import os, socket, time
import dramatiq
from dramatiq.brokers.redis import RedisBroker

dramatiq.set_broker(RedisBroker(url="{redis}", namespace="{queue}"))
_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_to = ("127.0.0.1", int(os.environ["BENCH_UDP_PORT"]))


@dramatiq.actor(queue_name="{queue}", max_retries=0)
def noop(sent_at=None):
    _udp.sendto(b"1" if sent_at is None else b"%.6f" % (time.time() - sent_at), _to)
'''


class Completions:
    """Counts UDP datagrams from workers; latency probes carry a float, completions b"1"."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.latencies_s: list[float] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self) -> None:
        while True:
            data = self.sock.recv(64)
            with self._changed:
                if data != b"1":
                    self.latencies_s.append(float(data))
                self.count += 1
                self._changed.notify_all()

    def wait_for(self, count: int, timeout_s: float) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.count >= count, timeout_s):
                raise TimeoutError(f"{self.count} of {count} completions after {timeout_s} s")


@dataclass
class Result:
    system: str
    how: str
    jobs: int
    # One entry per repetition: enqueue alone, and enqueue to last completion.
    enqueue_s: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    load_avg_1m: float = 0.0

    @property
    def rate(self) -> float:
        return self.jobs / statistics.median(self.seconds)

    @property
    def enqueue_rate(self) -> float:
        return self.jobs / statistics.median(self.enqueue_s)

    def measure(self, enqueue: Callable[[], object], wait_done: Callable[[], object]) -> None:
        self.load_avg_1m = os.getloadavg()[0]
        started = time.perf_counter()
        enqueue()
        self.enqueue_s.append(time.perf_counter() - started)
        wait_done()
        self.seconds.append(time.perf_counter() - started)


@contextlib.contextmanager
def process_group(command: list[str], *, env: dict[str, str], log: Path, cwd: Path,
                  stop_deadline_s: float = 10.0) -> Iterator[subprocess.Popen[bytes]]:
    """A subprocess in its own session, SIGTERM'd then, after `stop_deadline_s`, SIGKILL'd
    (the whole group) at the end. Also tests/deploy/test_run_failover.py's."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                   start_new_session=True)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=stop_deadline_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = START_DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.005)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def probe_latency(send: Callable[[float], object], completions: Completions, samples: int) -> list[float]:
    """One job at a time into idle workers; each waits for its own completion."""
    first = len(completions.latencies_s)
    for _ in range(samples):
        expected = completions.count + 1
        send(time.time())
        completions.wait_for(expected, 10.0)
        time.sleep(0.005)  # let the worker go idle again, as in a quiet system
    return completions.latencies_s[first:]


def run_slotmap(args: argparse.Namespace, work: Path, completions: Completions, env: dict[str, str]) -> list[Result]:
    results: list[Result] = []
    for fsync in args.fsync or ["never"]:
        results += _run_slotmap(args, work, completions, env, fsync)
    return results


def _run_slotmap(args: argparse.Namespace, work: Path, completions: Completions, env: dict[str, str],
                 fsync: str) -> list[Result]:
    port = free_port()
    (work / "sm_bench_handlers.py").write_text(SLOT_HANDLERS)
    ipc_dir = tempfile.mkdtemp(prefix="smb-", dir="/tmp")
    (work / "cluster.toml").write_text(textwrap.dedent(f"""
        [queue_server]
        listen = "127.0.0.1:{port}"
        [queues.bench_e2e]
        batch_size = 100
        lock_timeout_s = 60
        max_attempts = 3
        retry_base_s = 0.2
        retry_max_s = 1.0
        [master]
        handler_modules = ["sm_bench_handlers"]
        ipc_dir = "{ipc_dir}"
        static_slots = {{ bench_e2e = 2 }}
    """))
    server = [str(VENV_BIN / "slotmap"), "queue-server", "--config", str(work / "cluster.toml"),
              "--data-dir", str(work / f"queue-data-{fsync}"), "--fsync", fsync]
    master = [str(VENV_BIN / "slotmap"), "master", "--config", str(work / "cluster.toml"),
              "--report-file", str(work / "report.json"), "--log-level", "WARNING"]
    with process_group(server, env=env, log=work / "queue-server.log", cwd=work), \
            process_group(master, env=env, log=work / "master.log", cwd=work):
        client = QueueClient(f"127.0.0.1:{port}", timeout_s=30.0)
        wait_until(lambda: _ping(client), "queue server up")
        wait_until(lambda: (work / "report.json").exists()
                   and (work / "report.json").read_text().count('"phase":"idle"') == 2, "2 idle slots")

        def finished() -> bool:
            total = client.total("bench_e2e")
            return total.jobs == 0 and total.running == 0

        datas = [b""] * args.jobs

        def put_each() -> None:
            for data in datas:
                client.put("bench_e2e", data)

        def wait_done() -> None:
            wait_until(finished, "all jobs done", RUN_DEADLINE_S)

        system = f"Slotmap {fsync}"
        pipelined = Result(system, "put_many (pipelined)", args.jobs)
        one_by_one = Result(system, "put, one round trip each", args.jobs)
        for _ in range(args.reps):
            pipelined.measure(lambda: client.put_many("bench_e2e", datas), wait_done)
            one_by_one.measure(put_each, wait_done)
        pipelined.latencies_s = probe_latency(
            lambda t: client.put("bench_e2e", b"%.6f" % t), completions, args.samples
        )
        results = [pipelined, one_by_one]
        if args.fail_percent:
            results += measure_failing(args, client, completions, system)
        client.close()
    return results


def measure_failing(args: argparse.Namespace, client: QueueClient, completions: Completions,
                    system: str) -> list[Result]:
    """The all-good run and the run with --fail-percent failing jobs, rep by rep."""
    failing = max(1, round(args.jobs * args.fail_percent / 100))
    mixed = [b"fail" if i % (args.jobs // failing) == 0 and i // (args.jobs // failing) < failing
             else b"good" for i in range(args.jobs)]
    all_good = Result(system, "all good", args.jobs)
    with_failures = Result(system, f"{args.fail_percent:g}% fail: good done", args.jobs - failing)
    until_dead = Result(system, f"{args.fail_percent:g}% fail: all dead", failing)

    def dead() -> int:
        return int(client.stats("bench_e2e")["bench_e2e"].dead)

    for _ in range(args.reps):
        target = completions.count + args.jobs
        all_good.measure(lambda: client.put_many("bench_e2e", [b"good"] * args.jobs),
                         lambda: completions.wait_for(target, RUN_DEADLINE_S))  # noqa: B023
        client.delete_all_dead("bench_e2e")
        target = completions.count + args.jobs - failing
        started = time.perf_counter()
        with_failures.measure(lambda: client.put_many("bench_e2e", mixed),
                              lambda: completions.wait_for(target, RUN_DEADLINE_S))  # noqa: B023
        wait_until(lambda: dead() >= failing, "every failing job dead", RUN_DEADLINE_S)
        until_dead.seconds.append(time.perf_counter() - started)
        until_dead.enqueue_s.append(with_failures.enqueue_s[-1])
    return [all_good, with_failures, until_dead]


def _ping(client: QueueClient) -> bool:
    try:
        client.ping()
    except Exception:  # any failure means "not up yet"
        return False
    return True


def run_celery(args: argparse.Namespace, work: Path, completions: Completions, env: dict[str, str]) -> list[Result]:
    queue = f"sm_bench_celery_{os.getpid()}"
    (work / "sm_bench_celery.py").write_text(CELERY_TASKS.format(redis=REDIS_URL, queue=queue))
    sys.path.insert(0, str(work))
    import sm_bench_celery  # type: ignore[import-not-found]

    worker = [str(VENV_BIN / "celery"), "-A", "sm_bench_celery", "worker", "--pool", "prefork",
              "--concurrency", "2", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
              "--without-heartbeat", "-Q", queue]
    with process_group(worker, env=env, log=work / "celery.log", cwd=work):
        result = Result("Celery prefork", "task.delay()", args.jobs)
        measure_peer(result, sm_bench_celery.noop.delay, completions, args.reps)
        result.latencies_s = probe_latency(lambda t: sm_bench_celery.noop.delay(t), completions, args.samples)
    return [result]


def run_dramatiq(args: argparse.Namespace, work: Path, completions: Completions, env: dict[str, str]) -> list[Result]:
    queue = f"sm_bench_dramatiq_{os.getpid()}"
    (work / "sm_bench_dramatiq.py").write_text(DRAMATIQ_ACTORS.format(redis=REDIS_URL, queue=queue))
    sys.path.insert(0, str(work))
    import sm_bench_dramatiq  # type: ignore[import-not-found]

    worker = [str(VENV_BIN / "dramatiq"), "sm_bench_dramatiq", "--processes", "2"]
    with process_group(worker, env=env, log=work / "dramatiq.log", cwd=work):
        result = Result("Dramatiq", "actor.send()", args.jobs)
        measure_peer(result, sm_bench_dramatiq.noop.send, completions, args.reps)
        result.latencies_s = probe_latency(lambda t: sm_bench_dramatiq.noop.send(t), completions, args.samples)
    return [result]


def measure_peer(result: Result, send: Callable[[], object], completions: Completions, reps: int) -> None:
    """Warm up (the first task waits for the workers to be ready), then `reps` timed runs."""
    expected = completions.count + 1
    send()
    completions.wait_for(expected, START_DEADLINE_S)
    for _ in range(reps):
        target = completions.count + result.jobs

        def enqueue() -> None:
            for _ in range(result.jobs):
                send()

        result.measure(enqueue, lambda: completions.wait_for(target, RUN_DEADLINE_S))  # noqa: B023


RUNNERS = {"slotmap": run_slotmap, "celery": run_celery, "dramatiq": run_dramatiq}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=300, help="latency probes per system")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per system (median shown)")
    parser.add_argument("--fsync", action="append", choices=["never", "everysec", "always"],
                        help="the queue server's fsync for Slotmap (repeat to run each; default never)")
    parser.add_argument("--fail-percent", type=float, default=0.0,
                        help="Slotmap: also run with this share of jobs failing (max_attempts 3)")
    parser.add_argument("--only", action="append", choices=sorted(RUNNERS), help="run only these")
    args = parser.parse_args()
    completions = Completions()
    # The producers below import the task modules too.
    os.environ["BENCH_UDP_PORT"] = str(completions.port)
    work = Path(tempfile.mkdtemp(prefix="sm-e2e-"))
    env = dict(os.environ, PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{work}", BENCH_UDP_PORT=str(completions.port),
               PYTHONUNBUFFERED="1")
    results: list[Result] = []
    for name in args.only or ["slotmap", "celery", "dramatiq"]:
        try:
            results += RUNNERS[name](args, work, completions, env)
        except Exception as exc:  # one peer failing must not hide the others
            print(f"{name}: FAILED: {exc!r} (logs in {work})", file=sys.stderr)
    print(f"\nEnd to end, {args.jobs} no-op jobs, 2 workers (warm), enqueue to last completion;"
          f" median of {args.reps}; {os.cpu_count()} CPUs")
    print(f"{'system':<16} {'enqueue':<26} {'jobs/s':>9} {'enqueue/s':>10} {'load':>5}"
          f" {'lat p50 ms':>11} {'lat p99 ms':>11}")
    for r in results:
        p50 = f"{percentile(r.latencies_s, 0.5) * 1000:.2f}" if r.latencies_s else "-"
        p99 = f"{percentile(r.latencies_s, 0.99) * 1000:.2f}" if r.latencies_s else "-"
        print(f"{r.system:<16} {r.how:<26} {r.rate:>9,.0f} {r.enqueue_rate:>10,.0f}"
              f" {r.load_avg_1m:>5.1f} {p50:>11} {p99:>11}")
    print("latency: just before PUT/send to the handler's start, idle workers, one job at a time, "
          f"{args.samples} samples; load = 1-min load average during the last timed run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
