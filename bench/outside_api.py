"""A fake outside HTTP API limited to N calls per second: 429 above it (the rate-limit test,
bench/rate_limit.py and the guide's emails example call it).

The limit is a sliding window: a call is accepted when fewer than `per_s` calls were
accepted in the second before it, else answered 429 (and not counted). `burst` extra
calls are tolerated in that window (0: strict), the way real APIs allow a little slack for
network jitter. `GET /stats` returns the counts and the times of the accepted calls.

    python bench/outside_api.py --port 8099 --per-s 10     # run it by hand
"""
from __future__ import annotations

import argparse
import collections
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WINDOW_S = 1.0


class Meter:
    """Sliding-window limit over accepted calls (thread-safe, clock passed in)."""

    def __init__(self, per_s: int, *, burst: int = 0) -> None:
        self.per_s = per_s
        self.burst = burst
        self.accepted_at: collections.deque[float] = collections.deque()
        self.all_accepted: list[float] = []
        self.refused = 0
        self.refused_at: list[float] = []
        self.lock = threading.Lock()

    def call(self, now: float) -> bool:
        with self.lock:
            while self.accepted_at and self.accepted_at[0] <= now - WINDOW_S:
                self.accepted_at.popleft()
            if len(self.accepted_at) >= self.per_s + self.burst:
                self.refused += 1
                self.refused_at.append(now)
                return False
            self.accepted_at.append(now)
            self.all_accepted.append(now)
            return True

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {"accepted": len(self.all_accepted), "refused": self.refused,
                    "accepted_at": list(self.all_accepted), "refused_at": list(self.refused_at)}

    def reset(self) -> None:
        with self.lock:
            self.accepted_at.clear()
            self.all_accepted.clear()
            self.refused = 0
            self.refused_at.clear()


class OutsideApi:
    """The HTTP server in a thread: POST anything -> 200 or 429; GET /stats; POST /reset."""

    def __init__(self, per_s: int, *, burst: int = 0, host: str = "127.0.0.1", port: int = 0) -> None:
        self.meter = Meter(per_s, burst=burst)
        meter = self.meter

        class Handle(BaseHTTPRequestHandler):
            # Keep-alive: a client's calls reuse one connection (and one server thread), as
            # clients of real APIs do; a thread started per call added its own jitter.
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if self.path == "/reset":
                    meter.reset()
                    self._answer(200, b"{}")
                elif meter.call(time.monotonic()):
                    self._answer(200, b'{"sent": true}')
                else:
                    self._answer(429, b'{"error": "too many requests"}')

            def do_GET(self) -> None:
                self._answer(200, json.dumps(meter.stats()).encode())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # thousands of calls: no line each

        self.server = ThreadingHTTPServer((host, port), Handle)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OutsideApi:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5.0)


def achieved_per_s(accepted_at: list[float]) -> float:
    """Accepted calls per second between the first and the last accepted call."""
    if len(accepted_at) < 2:
        return 0.0
    return (len(accepted_at) - 1) / (accepted_at[-1] - accepted_at[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--per-s", type=int, default=10)
    parser.add_argument("--burst", type=int, default=0)
    args = parser.parse_args()
    with OutsideApi(args.per_s, burst=args.burst, port=args.port) as api:
        print(f"outside API at {api.url}: {args.per_s}/s, 429 above", flush=True)
        try:
            api.thread.join()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
