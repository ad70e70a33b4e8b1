"""STATS built in slices (queue_server/server/stats.py), in process: the bytes are exactly
those f5016ee's json.dumps wrote, at once and built a slice at a time, and STATS TOP's
"*" entry sums the queues left out (issue 16, point 11)."""
from __future__ import annotations

import json
import random
import time

import pytest

from queue_server.protocol.commands import Simple, parse_line
from queue_server.protocol.errors import ProtocolError
from queue_server.server import stats as server_stats
from queue_server.server.store import Store


def reference_stats_json(store: Store, name: str | None, now: float) -> bytes:
    """STATS as f5016ee built it (queue_server/server/responses.py), the oracle."""
    names = [name] if name is not None else sorted(store.queues)
    report: dict[str, dict[str, object]] = {}
    for queue_name in names:
        state = store.queues.get(queue_name)
        if state is None:
            report[queue_name] = {
                "ready": 0, "delayed": 0, "running": 0, "put": 0, "done": 0, "later": 0,
                "expired": 0, "by_priority": {}, "oldest_ready_age_s": 0.0,
                "failed": 0, "dead": 0, "failed_total": 0, "dead_total": 0, "dead_dropped": 0,
                "retried": 0, "deleted": 0, "ttl_expired": 0, "kept": 0,
            }
            continue
        oldest = state.oldest_ready_at()
        report[queue_name] = {
            "ready": state.ready, "delayed": state.delayed, "running": state.running,
            "put": state.put, "done": state.done, "later": state.later, "expired": state.expired,
            "by_priority": {str(p): n for p, n in sorted(state.waiting_by_priority.items(), reverse=True)},
            "oldest_ready_age_s": round(max(0.0, now - oldest), 6) if oldest is not None else 0.0,
            "failed": state.failed, "dead": len(state.dead), "failed_total": state.failed_total,
            "dead_total": state.dead_total, "dead_dropped": state.dead_dropped,
            "retried": state.retried, "deleted": state.deleted, "ttl_expired": state.ttl_expired,
            "kept": len(state.kept) if state.kept else 0,  # issue 26: finished jobs kept
        }
    body = json.dumps(report, separators=(",", ":")).encode()
    return b"200 OK %d\r\n" % len(body) + body


def _random_store(seed: int, queues: int) -> tuple[Store, float]:
    rng = random.Random(seed)
    store = Store()
    now = 1_700_000_000.0
    for index in range(queues * 3):
        name = f"q{rng.randrange(queues)}_{rng.choice('abc')}"
        store.put(name, rng.randrange(-3, 4), b"x", None, now - rng.random() * 100,
                  until=now + 50 if rng.random() < 0.2 else None)
        if index % 7 == 0:
            store.take((name,), 1, now, 30.0, None, False)
    return store, now


def _built(store: Store, top: int | None, now: float) -> bytes:
    build = server_stats._Build(None, store, top)  # type: ignore[arg-type]
    while True:
        done = build.step(time.perf_counter() + 0.001)
        if done is not None:
            return b"".join(done)


def test_stats_bytes_are_what_f5016ee_sent_at_once_and_built_in_slices(monkeypatch):
    for seed in range(5):
        store, now = _random_store(seed, 3000)
        monkeypatch.setattr(server_stats.time, "time", lambda now=now: now)
        expected = reference_stats_json(store, None, now)
        assert b"".join(server_stats.named(store, sorted(store.queues), now)) == expected
        assert _built(store, None, now) == expected
        for name in ("q1_a", "nosuch"):
            assert b"".join(server_stats.named(store, [name], now)) == reference_stats_json(store, name, now)


def test_stats_top_keeps_the_fullest_queues_and_sums_the_others(monkeypatch):
    store, now = _random_store(7, 500)
    monkeypatch.setattr(server_stats.time, "time", lambda: now)
    full = json.loads(reference_stats_json(store, None, now).split(b"\r\n", 1)[1])
    top = json.loads(_built(store, 10, now).split(b"\r\n", 1)[1])
    others = top.pop("*")
    assert len(top) == 10 and others["queues"] == len(full) - 10
    holding = sorted((e["ready"] + e["delayed"] + e["running"] for e in full.values()), reverse=True)
    assert sorted((e["ready"] + e["delayed"] + e["running"] for e in top.values()), reverse=True) \
        == holding[:10]
    for field in ("ready", "delayed", "running", "put", "done", "dead", "failed_total"):
        assert others[field] + sum(e[field] for e in top.values()) == sum(e[field] for e in full.values())
    rest = [e["oldest_ready_age_s"] for name, e in full.items() if name not in top]
    assert others["oldest_ready_age_s"] == max(rest)




def test_stats_lines_a_plain_client_sends_parse_as_before_and_the_new_forms_are_bounded():
    assert parse_line(b"STATS").command == Simple(b"STATS")
    assert parse_line(b"STATS TOP").command == Simple(b"STATS", "TOP")  # a queue named TOP
    assert parse_line(b"STATS a|b|a").command == Simple(b"STATS", queues=("a", "b"))
    assert parse_line(b"STATS TOP 7").command == Simple(b"STATS", top=7)
    for line in (b"STATS a b", b"STATS a||b", b"STATS TOP 0", b"STATS TOP 1001",
                 b"STATS TOP " + b"9" * 400, b"STATS " + b"|".join([b"q"] * 1001), b"STATS a|b-c"):
        with pytest.raises(ProtocolError):
            parse_line(line)
