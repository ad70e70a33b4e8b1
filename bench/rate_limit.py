"""A rate-limited outside API called from real slots: 429 share and achieved rate per batch size.

Real processes through the real CLI (`slotmap queue-server`, `slotmap pulsar`, `slotmap
master` with two slots); the outside API is bench/outside_api.py (10 calls/s, 429 above,
sliding one-second window). Modes:
- `paced`: rate_limit = 10/s, one permit per job as the handler reaches it (the default);
- `batch_permits`: rate_limit = 10/s, the batch's permits taken first (the old hook);
- `none`: no rate_limit: the slots call as fast as they can, slow_down() goes nowhere.

    .venv/bin/python bench/rate_limit.py                  # every mode, batch sizes 1, 5, 20
    .venv/bin/python bench/rate_limit.py --modes paced --jobs 100

tests/slot/test_rate_limit_outside_api.py runs `run_once` for the paced mode.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.append(str(HERE))
HANDLERS_DIR = HERE / "rate_handlers"

import psutil  # noqa: E402
from outside_api import OutsideApi, achieved_per_s  # noqa: E402

from queue_server.client import QueueClient  # noqa: E402

RATE_PER_S = 10
SLOTS = 2
QUEUE_OF_MODE = {"paced": "calls_paced", "batch_permits": "calls_batch_permits", "none": "calls_paced"}
START_DEADLINE_S = 30.0
# Fresh ports when our queue server could not take the one free_port() found.
PORT_ATTEMPTS = 3
STOP_DEADLINE_S = 15.0


@dataclass(frozen=True, slots=True)
class Result:
    mode: str
    batch_size: int
    jobs: int
    accepted: int
    refused: int
    achieved_per_s: float
    elapsed_s: float
    # False when the jobs were not all done within the run's time limit.
    finished: bool = True

    @property
    def refused_share(self) -> float:
        calls = self.accepted + self.refused
        return self.refused / calls if calls else 0.0

    def line(self) -> str:
        unfinished = "" if self.finished else f", NOT FINISHED: {self.accepted} of {self.jobs} sent"
        return (f"{self.mode:<14} batch {self.batch_size:>2}: {self.accepted + self.refused:>4} calls, "
                f"429 {self.refused_share:6.1%}, achieved {self.achieved_per_s:5.2f}/s "
                f"({self.achieved_per_s / RATE_PER_S:4.0%} of {RATE_PER_S}/s), {self.elapsed_s:.1f} s"
                f"{unfinished}")


def slotmap_command() -> list[str]:
    script = Path(sys.executable).with_name("slotmap")
    return [str(script)] if script.exists() else [sys.executable, "-m", "deploy.cli"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cluster_config(*, mode: str, batch_size: int, queue_port: int, pulsar_port: int,
                   data_dir: Path, ipc_dir: Path, limit: tuple[int, float] = (RATE_PER_S, 1.0)) -> str:
    return queues_config({QUEUE_OF_MODE[mode]: batch_size}, limited=mode != "none",
                         queue_port=queue_port, pulsar_port=pulsar_port, data_dir=data_dir,
                         ipc_dir=ipc_dir, limit=limit)


def queues_config(batch_sizes: dict[str, int], *, limited: bool, queue_port: int, pulsar_port: int,
                  data_dir: Path, ipc_dir: Path, limit: tuple[int, float] = (RATE_PER_S, 1.0)) -> str:
    """One cluster serving each queue of `batch_sizes` (queue -> batch size) with SLOTS slots."""
    permits, period_s = limit
    limit_line = f"rate_limit = {{ permits = {permits}, period_s = {period_s} }}\n" if limited else ""
    queues = "".join(f"[queues.{queue}]\nbatch_size = {size}\nlock_timeout_s = 60.0\n{limit_line}\n"
                     for queue, size in batch_sizes.items())
    slots = ", ".join(f"{queue} = {SLOTS}" for queue in batch_sizes)
    return (
        f'[queue_server]\nlisten = "127.0.0.1:{queue_port}"\ndata_dir = "{data_dir}"\nfsync = "never"\n\n'
        f"{queues}"
        f'[master]\npython_path = ["{HANDLERS_DIR}"]\nhandler_modules = ["sm_rate_handlers"]\n'
        f'ipc_dir = "{ipc_dir}"\nstatic_slots = {{ {slots} }}\nmax_load_per_cpu = 1000.0\n\n'
        f'[pulsar]\nlisten = "tcp://127.0.0.1:{pulsar_port}"\n'
    )


@contextlib.contextmanager
def cluster(workdir: Path, config_text: str, *, api_url: str,
            queue_apis: dict[str, str] | None = None) -> Iterator[str]:
    """Queue server, pulsar and master from `config_text`; yields the queue server address.
    `queue_apis` (queue -> URL): queues whose handlers call an API of their own."""
    config = workdir / "cluster.toml"
    config.write_text(config_text)
    env = dict(os.environ, SM_OUTSIDE_API=api_url, PYTHONUNBUFFERED="1")
    env.update({f"SM_OUTSIDE_API_{queue.upper()}": url for queue, url in (queue_apis or {}).items()})
    children: list[subprocess.Popen[bytes]] = []
    try:
        for part in ("queue-server", "pulsar", "master"):
            with open(workdir / f"{part}.log", "ab") as log:
                children.append(subprocess.Popen(
                    [*slotmap_command(), part, "--config", str(config)], stdout=log,
                    stderr=subprocess.STDOUT, cwd=workdir, env=env, start_new_session=True))
            if part == "queue-server":
                _wait_accepting(config_text, children[0], workdir)
        yield _listen_of(config_text)
    finally:
        for child in reversed(children):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()


def _listen_of(config_text: str) -> str:
    return config_text.split('listen = "', 1)[1].split('"', 1)[0]


class PortTaken(RuntimeError):
    """Our queue server exited before it listened: another process took the port that
    free_port() found free (two test workers can be handed the same one)."""


def _wait_accepting(config_text: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
    """Until our own queue server listens on its port. A connect test alone was fooled once:
    two workers got the same port, the second server could not bind, and the second run's
    clients used the first run's server (both counted half of the calls, 42 of 80)."""
    port = int(_listen_of(config_text).rpartition(":")[2])
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PortTaken(f"queue server exited: {(workdir / 'queue-server.log').read_text()}")
        with contextlib.suppress(psutil.Error):
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in psutil.Process(process.pid).net_connections(kind="tcp")):
                return
        time.sleep(0.05)
    raise RuntimeError("queue server did not listen on its port")


def _wait_done(client: QueueClient, queue: str, count: int, *, timeout_s: float, workdir: Path) -> None:
    _wait_all_done(client, {queue: count}, timeout_s=timeout_s, workdir=workdir)


def _wait_all_done(client: QueueClient, counts: dict[str, int], *, timeout_s: float,
                   workdir: Path) -> dict[str, float]:
    """Until each queue has done its count; when each got there (time.monotonic())."""
    deadline = time.monotonic() + timeout_s
    done_at: dict[str, float] = {}
    while True:
        all_stats = client.stats()
        now = time.monotonic()
        for queue, count in counts.items():
            stats = all_stats.get(queue)
            if queue not in done_at and stats is not None and stats.done >= count:
                done_at[queue] = now
        if len(done_at) == len(counts):
            return done_at
        if now >= deadline:
            tail = "\n".join((workdir / "master.log").read_text(errors="replace").splitlines()[-30:])
            missing = {queue: all_stats.get(queue) for queue in counts if queue not in done_at}
            raise AssertionError(f"jobs not done within {timeout_s} s (of {counts}: {missing}); "
                                 f"master log:\n{tail}")
        time.sleep(0.1)


def run_once(mode: str, batch_size: int, *, jobs: int, workdir: Path, burst: int = 0,
             must_finish: bool = True, limit: tuple[int, float] = (RATE_PER_S, 1.0)) -> Result:
    """One cluster, warmed up with two jobs, then `jobs` jobs through the outside API (within
    4x the time they need at the rate plus 30 s; AssertionError past it if `must_finish`)."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            return _run_once(mode, batch_size, jobs=jobs, workdir=workdir / f"run-{attempt}",
                             burst=burst, must_finish=must_finish, limit=limit)
        except PortTaken:
            if attempt == PORT_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _run_once(mode: str, batch_size: int, *, jobs: int, workdir: Path, burst: int,
              must_finish: bool, limit: tuple[int, float]) -> Result:
    workdir.mkdir(parents=True, exist_ok=True)
    queue = QUEUE_OF_MODE[mode]
    ipc_dir = Path(tempfile.mkdtemp(prefix="sm-rl-", dir="/tmp"))
    try:
        with OutsideApi(RATE_PER_S, burst=burst) as api:
            text = cluster_config(mode=mode, batch_size=batch_size, queue_port=free_port(),
                                  pulsar_port=free_port(), data_dir=workdir / "queue", ipc_dir=ipc_dir,
                                  limit=limit)
            with cluster(workdir, text, api_url=api.url) as address, \
                    QueueClient(address, timeout_s=10.0) as client:
                client.put_many(queue, [b"warm-up"] * SLOTS)
                _wait_done(client, queue, SLOTS, timeout_s=START_DEADLINE_S, workdir=workdir)
                # A second of quiet: the warm-up's calls leave the API's window.
                time.sleep(1.0)
                api.meter.reset()
                started = time.monotonic()
                client.put_many(queue, [b'{"n": %d}' % n for n in range(jobs)])
                finished = True
                try:
                    _wait_done(client, queue, SLOTS + jobs, timeout_s=jobs / RATE_PER_S * 4 + 30,
                               workdir=workdir)
                except AssertionError:
                    if must_finish:
                        raise
                    finished = False
                elapsed_s = time.monotonic() - started
            stats = api.meter.stats()
    finally:
        shutil.rmtree(ipc_dir, ignore_errors=True)
    return Result(mode, batch_size, jobs, stats["accepted"], stats["refused"],
                  achieved_per_s(stats["accepted_at"]), elapsed_s, finished)


def run_side_by_side(batch_sizes: list[int], *, jobs: int, workdir: Path,
                     burst: int = 0) -> dict[int, Result]:
    """The paced mode at each batch size at once, in one cluster: queue calls_paced_<size>
    with its own SLOTS slots, its own rate_limit and its own outside API, so each measures
    what run_once("paced", size) does; the jobs must all finish."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            return _run_side_by_side(batch_sizes, jobs=jobs, workdir=workdir / f"run-{attempt}",
                                     burst=burst)
        except PortTaken:
            if attempt == PORT_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _run_side_by_side(batch_sizes: list[int], *, jobs: int, workdir: Path, burst: int) -> dict[int, Result]:
    workdir.mkdir(parents=True, exist_ok=True)
    queues = {f"calls_paced_{size}": size for size in batch_sizes}
    ipc_dir = Path(tempfile.mkdtemp(prefix="sm-rl-", dir="/tmp"))
    try:
        with contextlib.ExitStack() as stack:
            apis = {queue: stack.enter_context(OutsideApi(RATE_PER_S, burst=burst)) for queue in queues}
            text = queues_config(queues, limited=True, queue_port=free_port(), pulsar_port=free_port(),
                                 data_dir=workdir / "queue", ipc_dir=ipc_dir)
            address = stack.enter_context(cluster(
                workdir, text, api_url=next(iter(apis.values())).url,
                queue_apis={queue: api.url for queue, api in apis.items()}))
            client = stack.enter_context(QueueClient(address, timeout_s=10.0))
            for queue in queues:
                client.put_many(queue, [b"warm-up"] * SLOTS)
            _wait_all_done(client, dict.fromkeys(queues, SLOTS), timeout_s=START_DEADLINE_S, workdir=workdir)
            # A second of quiet: the warm-up's calls leave the APIs' windows.
            time.sleep(1.0)
            for api in apis.values():
                api.meter.reset()
            started = time.monotonic()
            for queue in queues:
                client.put_many(queue, [b'{"n": %d}' % n for n in range(jobs)])
            done_at = _wait_all_done(client, dict.fromkeys(queues, SLOTS + jobs),
                                     timeout_s=jobs / RATE_PER_S * 4 + 30, workdir=workdir)
            all_stats = {queue: api.meter.stats() for queue, api in apis.items()}
    finally:
        shutil.rmtree(ipc_dir, ignore_errors=True)
    return {size: Result("paced", size, jobs, all_stats[queue]["accepted"], all_stats[queue]["refused"],
                         achieved_per_s(all_stats[queue]["accepted_at"]), done_at[queue] - started)
            for queue, size in queues.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="paced,batch_permits,none")
    parser.add_argument("--batch-sizes", default="1,5,20")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--burst", type=int, default=0, help="calls the API tolerates over its rate")
    parser.add_argument("--limit", default=f"{RATE_PER_S}/1",
                        help="the queue's rate_limit as permits/period_s (e.g. 49/5 for 9.8/s)")
    args = parser.parse_args()
    permits, _, period = args.limit.partition("/")
    limit = (int(permits), float(period or 1))
    print(f"outside API: {RATE_PER_S}/s sliding window (burst {args.burst}), {SLOTS} slots, "
          f"{args.jobs} jobs per run, rate_limit {limit[0]}/{limit[1]:g} s", flush=True)
    for mode in args.modes.split(","):
        for size in (int(s) for s in args.batch_sizes.split(",")):
            workdir = Path(tempfile.mkdtemp(prefix=f"sm-rate-{mode}-{size}-"))
            try:
                result = run_once(mode, size, jobs=args.jobs, workdir=workdir, burst=args.burst,
                                  must_finish=False, limit=limit)
                print(result.line(), flush=True)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
