"""A realistic hour of manager history written through manager.storage.db's models (for tests and screenshots)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from manager.storage.db import Base, Event, HostSample, QueueSample, SlotMapRow, make_engine

PLAN_INTERVAL_S = 5.0
HISTORY_S = 3600.0
GIB = 1024**3
MIB = 1024**2
NOW = 1_717_243_200.0  # 2024-06-01 12:00:00 UTC: the newest sample


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    priority: int
    min_slots: int
    max_slots: int
    slots: int
    desired: int
    load: float
    waiting: int
    running: int
    delayed: int
    jobs_per_s: float
    mean_job_s: float
    errors: int
    paused: bool = False


# The newest sample of each queue: some want more slots (red), some fewer (blue).
QUEUES = (
    QueueSpec("mail_send", 10, 2, 40, 18, 24, 1.37, 4210, 180, 12, 312.4, 0.058, 0),
    QueueSpec("push_notify", 10, 4, 60, 22, 22, 0.81, 95, 40, 0, 845.0, 0.021, 3),
    QueueSpec("photo_resize", 7, 2, 30, 12, 9, 0.46, 3, 24, 0, 41.7, 0.231, 0),
    QueueSpec("cache_purge", 8, 2, 12, 2, 2, 0.12, 0, 1, 0, 120.3, 0.0041, 0),
    QueueSpec("friend_suggest", 5, 1, 20, 6, 8, 1.08, 1532, 30, 240, 18.2, 0.402, 1),
    QueueSpec("search_index", 5, 1, 24, 9, 5, 0.35, 12, 18, 3, 66.0, 0.097, 0),
    QueueSpec("video_transcode", 3, 1, 16, 8, 14, 2.64, 388, 8, 0, 0.9, 9.75, 2),
    QueueSpec("post_delete", 4, 0, 10, 1, 1, 0.73, 2, 1, 0, 3.2, 0.18, 0),
    QueueSpec("comments_delete", 2, 0, 10, 2, 3, 0.95, 77, 6, 0, 11.4, 0.15, 0),
    QueueSpec("likes_delete", 1, 0, 8, 0, 0, 0.0, 0, 0, 0, 0.0, 0.0, 0, paused=True),
)
HOSTS = ("node01", "node02", "node03", "node04", "node05", "node06")
LOST_HOST = "node06"
CONFIGURED_ONLY = "newsletter"  # in the test config, never reported


def config_toml(database_url: str, *, token: str | None = None) -> str:
    """A cluster config naming the sample queues (plus one the manager never reported)."""
    lines = ["[manager]", f'database_url = "{database_url}"', f"plan_interval_s = {PLAN_INTERVAL_S}", ""]
    if token:
        lines += ["[admin]", f'token = "{token}"', ""]
    for spec in (*QUEUES, QueueSpec(CONFIGURED_ONLY, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0)):
        lines += [f"[queues.{spec.name}]", f"priority = {spec.priority}",
                  f"min_slots = {spec.min_slots}", f"max_slots = {spec.max_slots}", ""]
    return "\n".join(lines)


def _wave(spec: QueueSpec, age_s: float) -> float:
    """1.0 now, drifting smoothly back in time (a different phase per queue)."""
    phase = len(spec.name)
    return 1.0 + 0.35 * math.sin(age_s / 900 + phase) - 0.35 * math.sin(phase)


def queue_rows(*, now: float, history_s: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    steps = int(history_s / PLAN_INTERVAL_S)
    for step in range(steps, -1, -1):
        at = now - step * PLAN_INTERVAL_S
        for spec in QUEUES:
            k = _wave(spec, step * PLAN_INTERVAL_S) if step else 1.0
            slots = max(spec.min_slots if not spec.paused else 0, round(spec.slots * k))
            rows.append({
                "at_unix": at, "queue": spec.name, "priority": spec.priority,
                "min_slots": spec.min_slots, "max_slots": spec.max_slots,
                "slots_current": slots if step else spec.slots,
                "slots_avg": spec.slots * (k if step else 0.94),
                "slots_desired": round(spec.desired * k) if step else spec.desired,
                "load": spec.load * k, "waiting": round(spec.waiting * k * k),
                "running": round(spec.running * k), "delayed": round(spec.delayed * k),
                "jobs_done": round(spec.jobs_per_s * k * PLAN_INTERVAL_S),
                "jobs_per_s": spec.jobs_per_s * k, "mean_job_s": spec.mean_job_s,
                "errors": spec.errors if step % 7 == 0 or not step else 0, "paused": spec.paused,
            })
    return rows


def slot_map(*, now: float) -> list[dict[str, object]]:
    """Each queue's current slots spread round-robin over the live hosts."""
    alive = [host for host in HOSTS if host != LOST_HOST]
    cells: dict[tuple[str, str], int] = {}
    turn = 0
    for spec in QUEUES:
        for _ in range(spec.slots):
            key = (alive[turn % len(alive)], spec.name)
            cells[key] = cells.get(key, 0) + 1
            turn += 1
    return [{"at_unix": now, "host": host, "queue": queue, "slots": slots}
            for (host, queue), slots in sorted(cells.items())]


def host_rows(*, now: float, mapped: list[dict[str, object]]) -> list[dict[str, object]]:
    rows = []
    for index, host in enumerate(HOSTS):
        slots = sum(int(str(cell["slots"])) for cell in mapped if cell["host"] == host)
        total = (32 if index < 3 else 16) * GIB
        avg_slot = (48 + 4 * index) * MIB
        rows.append({
            "at_unix": now if host != LOST_HOST else now - 40, "host": host, "alive": host != LOST_HOST,
            "capacity": 40 if index < 3 else 20, "slots": slots, "mem_total_bytes": total,
            "mem_available_bytes": total // 3 + index * 700 * MIB, "master_pss_bytes": 180 * MIB,
            "slots_pss_bytes": max(0, slots * avg_slot - 180 * MIB), "avg_slot_bytes": avg_slot,
            "load_avg_1m": 1.5 + index * 0.75, "recycled_for_memory": 3 * index,
            "killed_hung": index % 3, "recycled_for_jobs": 10 * index + 1, "recycled_for_age": index,
            "load_cap": "capped by load: 40 of 64 slots (load 3.00 on 2 CPUs, limit 2)" if index == 2 else None,
            # node02 runs other handler code (a rolling deploy), node05 refused a reload.
            "code_version": "0f9e8d7c6b5a" if index == 1 else "a1b2c3d4e5f6",
            "code_reload_failure": ("code reload refused: the new code failed to import: module app: "
                                    "SyntaxError; version a1b2c3d4e5f6 keeps serving") if index == 4 else None,
        })
    return rows


def event_rows(*, now: float) -> list[dict[str, object]]:
    moves = [("mail_send", "node02", 2), ("video_transcode", "node04", 1), ("photo_resize", "node01", -3),
             ("friend_suggest", "node03", 2), ("search_index", "node05", -4)]
    rows: list[dict[str, object]] = [
        {"at_unix": now - 3000 + i * 400, "kind": "slots_moved", "queue": queue, "host": host,
         "actor": "manager", "message": f"{queue}: {delta:+d} slots on {host}",
         "detail": {"delta": delta}}
        for i, (queue, host, delta) in enumerate(moves)
    ]
    rows += [
        {"at_unix": now - 2500, "kind": "master_lost", "queue": None, "host": "node04", "actor": "manager",
         "message": "node04: no heartbeat for 3 s; its slots re-planned", "detail": None},
        {"at_unix": now - 2380, "kind": "master_back", "queue": None, "host": "node04", "actor": "manager",
         "message": "node04: master reconnected", "detail": None},
        {"at_unix": now - 1200, "kind": "queue_paused", "queue": "likes_delete", "host": None,
         "actor": "manager", "message": "likes_delete paused (admin override)", "detail": None},
        {"at_unix": now - 40, "kind": "master_lost", "queue": None, "host": LOST_HOST, "actor": "manager",
         "message": f"{LOST_HOST}: no heartbeat for 3 s; its slots re-planned", "detail": None},
    ]
    return sorted(rows, key=lambda row: float(str(row["at_unix"])))


def fill(engine: Engine, *, now: float = NOW, history_s: float = HISTORY_S) -> None:
    """Create the tables and write `history_s` of samples ending at `now`."""
    Base.metadata.create_all(engine)
    mapped = slot_map(now=now)
    with Session(engine) as session:
        session.execute(insert(QueueSample), queue_rows(now=now, history_s=history_s))
        session.execute(insert(SlotMapRow), slot_map(now=now - 300) + mapped)
        session.execute(insert(HostSample), host_rows(now=now, mapped=mapped))
        session.execute(insert(Event), event_rows(now=now))
        session.commit()


def make_database(path: Path, *, now: float = NOW, history_s: float = HISTORY_S) -> str:
    """A SQLite file at `path` filled with the sample; returns its URL."""
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    fill(engine, now=now, history_s=history_s)
    engine.dispose()
    return url
