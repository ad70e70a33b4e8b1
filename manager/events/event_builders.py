"""The manager's events as the dashboard lists them (pure): slot moves and overrides
(a master joining or leaving: manager/hosts/host_events.py, beside the masters' link)."""
from __future__ import annotations

from collections.abc import Mapping

from manager.storage.model import Move, Plan
from manager.storage.store import EventKind, NewEvent, Override


def moves_events(plan: Plan) -> list[NewEvent]:
    """One event per queue a plan moved slots of, so the dashboard can filter by queue."""
    touched: dict[str, list[Move]] = {}
    for move in plan.moves:
        for queue in {move.to_queue, move.from_queue} - {None}:
            touched.setdefault(queue, []).append(move)  # type: ignore[arg-type]
    events = []
    for queue, moves in sorted(touched.items()):
        gained = sum(1 for m in moves if m.to_queue == queue)
        lost = len(moves) - gained
        kinds = sorted({str(m.kind) for m in moves})
        events.append(NewEvent(
            kind=EventKind.SLOTS_MOVED,
            queue=queue,
            message=f"{queue}: {gained - lost:+d} slots ({gained} in, {lost} out; {', '.join(kinds)})",
            detail={
                "gained": gained,
                "lost": lost,
                "moves": [
                    {"kind": str(m.kind), "host": m.host, "slot": m.slot_id,
                     "from": m.from_queue, "to": m.to_queue}
                    for m in moves[:200]
                ],
            },
        ))
    return events


def override_events(seen: Mapping[str, float], overrides: Mapping[str, Override]) -> list[NewEvent]:
    """One event per override that is new or changed since the last plan."""
    events = []
    for name, override in sorted(overrides.items()):
        if seen.get(name) == override.updated_at_unix:
            continue
        parts = ["paused" if override.paused else "running"]
        if override.min_slots is not None:
            parts.append(f"min {override.min_slots}")
        if override.max_slots is not None:
            parts.append(f"max {override.max_slots}")
        events.append(NewEvent(
            kind=EventKind.OVERRIDE_APPLIED, queue=name, actor="admin",
            message=f"queue {name}: override applied ({', '.join(parts)})",
            detail={"paused": override.paused, "min_slots": override.min_slots,
                    "max_slots": override.max_slots},
        ))
    return events
