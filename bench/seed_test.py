"""The sockPQd manual's own benchmark (seeds/000, section "Тесты производительности").

What the manual describes, in English:
- The first test: ten times, the time to add 40,000 small jobs (20-40 bytes)
  with random priorities, each into a random one of 10 queues; so the time to
  add 40,000 new jobs with 0, 40,000, 80,000, ... jobs already queued. The
  second test: ten times, the time to take and "do" (report DONE) 40,000 jobs
  from random queues, with 40,000, 80,000, ... jobs queued. The old sockPQd
  (arrays) reached about 5,260 adds/s and 2,580 takes/s at 100,000-200,000
  jobs queued.
- After sockPQd moved to linked lists the tests were repeated as 20 rounds of
  adding 20,000 jobs, then 20 rounds of taking 20,000 jobs: about 6,115
  adds/s and 3,225 takes/s on average, independent of the queue depth.

Here: one client, one request at a time (PUT, then GET + DONE), as the
manual's Perl client did. `--variant linked` (default) is the 20 x 20,000
run whose figures are quoted above; `--variant arrays` is the 10 x 40,000 run.
Priorities are random integers 0..99 (the manual does not give the range),
payloads random 20..40 bytes, queues seed0..seed9. Takes use a bare `GET`
(the server picks a random non-empty queue: sockPQd's "random queue") and
then `DONE <id>`. Each round is timed alone; the report gives every round
and the mean rate (total jobs / total time), as the manual does.

beanstalkd can run the same test as a reference: 10 tubes (`use` + `put`
written together, one round trip), priority 1000-p (lower is more urgent
there), takes by `reserve-with-timeout 0` + `delete` with all 10 tubes
watched.

Run alone:  .venv/bin/python bench/seed_test.py [--server ours|beanstalkd|both]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
from rawclient import Conn, ProtocolError

VARIANTS = {"linked": (20, 20_000), "arrays": (10, 40_000)}
MANUAL = {  # what sockPQd reached, from the manual
    "linked": {"put": 6115.0, "get": 3225.0},
    "arrays": {"put": 5260.0, "get": 2580.0},
}
QUEUES = 10


@dataclass
class SeedResult:
    server: str
    rounds: int
    per_round: int
    put_rounds: list[tuple[int, float]] = field(default_factory=list)  # (depth before, rate)
    get_rounds: list[tuple[int, float]] = field(default_factory=list)
    put_total_s: float = 0.0
    get_total_s: float = 0.0

    @property
    def put_rate(self) -> float:
        return self.rounds * self.per_round / self.put_total_s if self.put_total_s else 0.0

    @property
    def get_rate(self) -> float:
        return self.rounds * self.per_round / self.get_total_s if self.get_total_s else 0.0

    def summary(self) -> str:
        pr = [r for _, r in self.put_rounds]
        gr = [r for _, r in self.get_rounds]
        return (f"{self.server}: {self.rounds} x {self.per_round:,}: "
                f"add {self.put_rate:,.0f}/s (rounds {min(pr):,.0f}..{max(pr):,.0f}), "
                f"take+done {self.get_rate:,.0f}/s (rounds {min(gr):,.0f}..{max(gr):,.0f})")

    def table(self) -> str:
        lines = ["| round | queued before | adds/s | queued before take | takes+DONE/s |",
                 "| ---: | ---: | ---: | ---: | ---: |"]
        for i in range(self.rounds):
            d1, r1 = self.put_rounds[i]
            d2, r2 = self.get_rounds[i]
            lines.append(f"| {i + 1} | {d1:,} | {r1:,.0f} | {d2:,} | {r2:,.0f} |")
        return "\n".join(lines)


def _jobs(rng: random.Random, n: int) -> list[tuple[int, int, bytes]]:
    letters = b"abcdefghijklmnopqrstuvwxyz0123456789"
    out = []
    for _ in range(n):
        size = rng.randint(20, 40)
        out.append((rng.randrange(QUEUES), rng.randint(0, 99),
                    bytes(rng.choice(letters) for _ in range(size))))
    return out


def run_ours(host: str, port: int, rounds: int, per_round: int, seed: int = 1,
             progress: bool = False) -> SeedResult:
    res = SeedResult("ours", rounds, per_round)
    rng = random.Random(seed)
    with Conn(host, port) as c:
        depth = 0
        for r in range(rounds):
            reqs = [b"PUT seed%d %d %d\r\n" % (q, p, len(d)) + d for q, p, d in _jobs(rng, per_round)]
            send, readline = c.send, c.readline
            t0 = time.perf_counter()
            for req in reqs:
                send(req)
                line = readline()
                if line[:3] != b"200":
                    raise ProtocolError(f"PUT: {line!r}")
            dt = time.perf_counter() - t0
            res.put_total_s += dt
            res.put_rounds.append((depth, per_round / dt))
            depth += per_round
            if progress:
                print(f"  seed/ours add round {r + 1}: {per_round / dt:,.0f}/s", file=sys.stderr)
        for r in range(rounds):
            send, readline, readexact = c.send, c.readline, c.readexact
            t0 = time.perf_counter()
            for _ in range(per_round):
                send(b"GET\r\n")
                line = readline()
                parts = line.split(b" ")
                if parts[0] != b"200":
                    raise ProtocolError(f"GET: {line!r}")
                readexact(int(parts[5]))
                send(b"DONE " + parts[3] + b"\r\n")
                line = readline()
                if line[:3] != b"200":
                    raise ProtocolError(f"DONE: {line!r}")
            dt = time.perf_counter() - t0
            res.get_total_s += dt
            res.get_rounds.append((depth, per_round / dt))
            depth -= per_round
            if progress:
                print(f"  seed/ours take round {r + 1}: {per_round / dt:,.0f}/s", file=sys.stderr)
    return res


def run_beanstalkd(host: str, port: int, rounds: int, per_round: int, seed: int = 1,
                   progress: bool = False) -> SeedResult:
    res = SeedResult("beanstalkd", rounds, per_round)
    rng = random.Random(seed)
    with Conn(host, port) as c:
        c.send(b"".join(b"watch seed%d\r\n" % q for q in range(QUEUES)) + b"ignore default\r\n")
        c.readlines(QUEUES + 1)
        depth = 0
        for r in range(rounds):
            reqs = [b"use seed%d\r\nput %d 0 120 %d\r\n" % (q, 1000 - p, len(d)) + d + b"\r\n"
                    for q, p, d in _jobs(rng, per_round)]
            send, readlines = c.send, c.readlines
            t0 = time.perf_counter()
            for req in reqs:
                send(req)
                line = readlines(2)[1]
                if line[:8] != b"INSERTED":
                    raise ProtocolError(f"put: {line!r}")
            dt = time.perf_counter() - t0
            res.put_total_s += dt
            res.put_rounds.append((depth, per_round / dt))
            depth += per_round
            if progress:
                print(f"  seed/beanstalkd add round {r + 1}: {per_round / dt:,.0f}/s", file=sys.stderr)
        for r in range(rounds):
            send, readline, readexact = c.send, c.readline, c.readexact
            t0 = time.perf_counter()
            for _ in range(per_round):
                send(b"reserve-with-timeout 0\r\n")
                line = readline()
                parts = line.split(b" ")
                if parts[0] != b"RESERVED":
                    raise ProtocolError(f"reserve: {line!r}")
                readexact(int(parts[2]) + 2)
                send(b"delete " + parts[1] + b"\r\n")
                if readline() != b"DELETED":
                    raise ProtocolError("delete failed")
            dt = time.perf_counter() - t0
            res.get_total_s += dt
            res.get_rounds.append((depth, per_round / dt))
            depth -= per_round
            if progress:
                print(f"  seed/beanstalkd take round {r + 1}: {per_round / dt:,.0f}/s", file=sys.stderr)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=["ours", "beanstalkd", "both"], default="ours")
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="linked")
    ap.add_argument("--rounds", type=int, help="override the variant's rounds")
    ap.add_argument("--per-round", type=int, help="override the variant's jobs per round")
    ap.add_argument("--quick", action="store_true", help="5 rounds x 2,000 jobs")
    ap.add_argument("--fsync", default="never", help="our server's --fsync (default never: "
                    "sockPQd kept everything in RAM)")
    ap.add_argument("--connect", help="HOST:PORT of a running server of ours instead of starting one")
    ap.add_argument("--beanstalkd", help="path to beanstalkd")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    rounds, per_round = VARIANTS[args.variant]
    if args.quick:
        rounds, per_round = 5, 2_000
    rounds = args.rounds or rounds
    per_round = args.per_round or per_round
    peers.install_cleanup()
    results = []
    try:
        if args.server in ("ours", "both"):
            if args.connect:
                host, port = args.connect.rsplit(":", 1)
                results.append(run_ours(host, int(port), rounds, per_round, progress=args.progress))
            else:
                srv = peers.start_slotmap(args.fsync)
                try:
                    results.append(run_ours(srv.host, srv.port, rounds, per_round,
                                            progress=args.progress))
                finally:
                    srv.stop()
        if args.server in ("beanstalkd", "both"):
            path = peers.find_beanstalkd(args.beanstalkd)
            if not path:
                print(peers.BEANSTALKD_INSTALL_HINT, file=sys.stderr)
            else:
                srv = peers.start_beanstalkd(path)
                try:
                    results.append(run_beanstalkd(srv.host, srv.port, rounds, per_round,
                                                  progress=args.progress))
                finally:
                    srv.stop()
    finally:
        peers.stop_all()
    m = MANUAL[args.variant]
    print(f"sockPQd in its manual ({args.variant}): add {m['put']:,.0f}/s, take+done {m['get']:,.0f}/s")
    for r in results:
        print(r.summary())
        print(r.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
