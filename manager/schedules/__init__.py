"""Periodic jobs: the active manager puts each tick of `[schedules.*]` once (ticks.py pure, state.py
its rows in the cluster database, firing.py the thread that fires)."""
