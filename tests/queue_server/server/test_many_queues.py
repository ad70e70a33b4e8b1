"""Many queues (issue 16, point 11): STATS stays byte for byte what it was and no longer
stops the loop, its opt-in forms (`STATS q1|q2|...`, `STATS TOP n`), and drained queues
are forgotten after forget_drained_queues_s.

On f5016ee: PING waited for the whole STATS (about 1 s with 30,000 queues here), the
opt-in forms were 400, and drained queues stayed listed forever (the setting did not
exist, so a config naming it did not start)."""
from __future__ import annotations

import json
import random
import socket
import threading
import time

from queue_server.server import stats as server_stats
from queue_server.server.store import Store
from tests.conftest import HOST, QueueServer
from tests.queue_server.util import get_job, poll_until, put_ok

MANY = 30_000  # queues of one job each: sized for CI's 2 busy cores
PING_BOUND_S = 0.25  # the worst PING while STATS is built (50 ms of work a turn, with slack)


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
                "retried": 0, "deleted": 0, "ttl_expired": 0,
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


def _fill(server: QueueServer, queues: int) -> None:
    client = server.connect(timeout_s=60.0)
    client.send(b"".join(b"PUT m%d 0 1\r\nx" % index for index in range(queues)))
    client.expect(b"200 OK\r\n" * queues)
    client.close()


def _read_sized(sock: socket.socket) -> bytes:
    reader = sock.makefile("rb")
    head = reader.readline()
    assert head.startswith(b"200 OK "), head
    return reader.read(int(head.split()[2]))


def test_ping_is_answered_while_a_big_stats_is_built(start_queue_server):
    server = start_queue_server("--fsync", "never")
    _fill(server, MANY)
    pinger = server.connect(timeout_s=30.0)
    assert pinger.request(b"PING") == b"200 PONG"
    asker = socket.create_connection((HOST, server.port), timeout=60.0)
    replies: list[bytes] = []

    def ask() -> None:
        for _ in range(3):
            asker.sendall(b"STATS\r\n")
            replies.append(_read_sized(asker))

    thread = threading.Thread(target=ask)
    thread.start()
    worst = 0.0
    while thread.is_alive():
        started = time.perf_counter()
        assert pinger.request(b"PING") == b"200 PONG"
        worst = max(worst, time.perf_counter() - started)
    thread.join()
    asker.close()
    assert len(replies) == 3 and all(len(json.loads(body)) == MANY for body in replies)
    assert worst < PING_BOUND_S, f"a PING waited {worst * 1000:.0f} ms behind STATS"


def test_stats_opt_in_forms_answer_a_few_queues(start_queue_server):
    server = start_queue_server("--fsync", "never")
    _fill(server, 3000)
    client = server.connect()
    put_ok(client, "m7", 0, b"y")
    client.send(b"STATS m1|m7|nosuch\r\n")
    named = json.loads(client.exact(int(client.line().split()[2])))
    assert sorted(named) == ["m1", "m7", "nosuch"] and named["m7"]["ready"] == 2
    client.send(b"STATS TOP 1\r\nPING\r\n")  # built over turns; the PING waits its turn
    top = json.loads(client.exact(int(client.line().split()[2])))
    assert list(top) == ["m7", "*"] and top["*"]["queues"] == 2999 and top["*"]["ready"] == 2999
    assert client.line() == b"200 PONG"
    client.send(b"STATS TOP 0\r\n")
    assert client.line().startswith(b"400 Bad Request")


def test_drained_queues_are_forgotten_after_the_setting(start_queue_server):
    server = start_queue_server(config="[queue_server]\nforget_drained_queues_s = 1.0\n")
    client = server.connect(timeout_s=15.0)
    for index in range(50):
        put_ok(client, f"gone{index}", 0, b"x")
        job = get_job(client, f"GET gone{index}")
        client.send(b"DONE %d\r\n" % job.id)
        assert client.line().startswith(b"200 OK")
    put_ok(client, "kept", 0, b"x")  # a job waits
    put_ok(client, "dies", 0, b"x")
    job = get_job(client, "GET dies")
    client.send(b"FAIL %d DEAD 4\r\nboom" % job.id)
    assert client.line().startswith(b"200 OK")
    waiter = server.connect(timeout_s=60.0)
    waiter.send(b"GETB waited\r\n")  # a client waits on it by name
    put_ok(client, "waited", 0, b"x")
    assert waiter.line().startswith(b"200 OK waited")
    waiter.send(b"GETB waited\r\n")

    def listed() -> list[str]:
        client.send(b"STATS\r\n")
        return sorted(json.loads(client.exact(int(client.line().split()[2]))))

    assert len(listed()) == 53
    poll_until(lambda: listed() == ["dies", "kept", "waited"], timeout_s=30.0,
               what="the 50 drained queues forgotten")
    started = time.monotonic()
    while time.monotonic() - started < 2.0:  # the others stay
        assert listed() == ["dies", "kept", "waited"]
        time.sleep(0.2)
    put_ok(client, "gone3", 0, b"back")  # a forgotten queue comes back with its next job
    client.send(b"STATS gone3\r\n")
    back = json.loads(client.exact(int(client.line().split()[2])))
    assert back["gone3"]["ready"] == 1 and back["gone3"]["put"] == 1
