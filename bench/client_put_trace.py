"""The client's PUT with OpenTelemetry absent: a base commit against the checkout (issue 26
point 6: traces must cost nothing when the `otel` extra is not installed).

What the trace adds to a PUT happens before any I/O: `current_traceparent()` and the
request's bytes. This times exactly that (`put_request(...)`, plus the trace look-up on
the checkout, as operations.put_job calls them), in fresh interpreters where importing
`opentelemetry` fails as if it were not installed (a finder first in sys.meta_path), alternating base and checkout per rep.
Prints ns per PUT and the ratio checkout/base.

    .venv/bin/python bench/client_put_trace.py --base main          # about a minute
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NUMBER = 200_000

# Run inside each interpreter: opentelemetry made unimportable, then the PUT's request
# built NUMBER times; prints ns per PUT.
_PROBE = r"""
import sys, timeit

class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("opentelemetry is not installed (bench)")
        return None

sys.meta_path.insert(0, _Absent())
from queue_server.protocol import requests as req
try:
    from queue_server.client.tracing import INSTALLED, current_traceparent
except ImportError:
    INSTALLED = None
if INSTALLED is None:
    def put():
        return req.put_request("q", b"x" * 32, priority_=0, keyed=True)
else:
    assert not INSTALLED
    def put():  # as operations.put_job
        return req.put_request("q", b"x" * 32, priority_=0, keyed=True,
                               trace=current_traceparent() if INSTALLED else None)
assert b"TRACE" not in put()
best = min(timeit.repeat(put, number=%d, repeat=5))
print(best / %d * 1e9)
"""


def _run(tree: Path) -> float:
    out = subprocess.run([sys.executable, "-c", _PROBE % (NUMBER, NUMBER)], cwd=tree,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def _archive(commit: str, into: Path) -> Path:
    tar = into / "base.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(tar), commit], check=True)
    tree = into / "base"
    with tarfile.open(tar) as archive:
        archive.extractall(tree, filter="data")
    return tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="put-trace-"))
    try:
        base = _archive(args.base, work)
        new = work / "new"
        shutil.copytree(REPO, new, ignore=shutil.ignore_patterns(".venv", ".git", "var", "*.pyc"))
        timings: dict[str, list[float]] = {"base": [], "new": []}
        for _ in range(args.reps):
            timings["base"].append(_run(base))
            timings["new"].append(_run(new))
        b, n = statistics.median(timings["base"]), statistics.median(timings["new"])
        print(f"PUT request built, otel absent: base {b:.0f} ns, checkout {n:.0f} ns, "
              f"ratio {n / b:.3f} (medians of {args.reps} reps, best of 5 x {NUMBER:,} each)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
