"""A queue's slot recycling keys: after a number of jobs or an age, each with a jitter (gunicorn's
`max_requests` + `max_requests_jitter`, Celery's `worker_max_tasks_per_child`, uWSGI's
`max-requests` / `max-worker-lifetime`).

The jitter is absolute and added, as gunicorn's is (`max_requests + randint(0, jitter)`): it is
in the limit's own unit, so an operator coming from gunicorn reads it the same, and the limit
stays a floor (no slot leaves before `max_jobs_per_slot` jobs) with the jitter the spread over
which the slots of a queue leave. A fraction would tie the spread to the limit; the spread
that keeps restarts apart is a matter of how long a fork and a setup() take, not of the limit.
"""
from __future__ import annotations

from pydantic import Field

from config.bounded import MAX_SECONDS

# A billion jobs is about 30 years at one job a second per slot: past it the limit means nothing.
MAX_JOBS = 10**9

MAX_JOBS_PER_SLOT = Field(
    default=0, ge=0, le=MAX_JOBS,
    description="A slot that has taken this many jobs (plus its jitter) finishes its batch and exits; "
                "its master forks a fresh one as after a memory recycle (gunicorn's max_requests, "
                "Celery's worker_max_tasks_per_child). Its last batch is cut to what is left, so it "
                "runs exactly that many. 0: no limit.")
MAX_JOBS_PER_SLOT_JITTER = Field(
    default=0, ge=0, le=MAX_JOBS,
    description="Jobs added to max_jobs_per_slot, drawn for each slot at its start between 0 and this "
                "(gunicorn's max_requests_jitter), so the slots of a queue started together do not all "
                "leave together. Needs max_jobs_per_slot.")
MAX_SLOT_AGE_S = Field(
    default=0.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False,
    description="A slot this many seconds old (plus its jitter) that has run a batch leaves after the "
                "batch it runs, or at once when idle; its master forks a fresh one (uWSGI's "
                "max-worker-lifetime). A slot that has run no batch stays, so an idle queue is not "
                "re-forked for nothing. 0: no limit.")
MAX_SLOT_AGE_JITTER_S = Field(
    default=0.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False,
    description="Seconds added to max_slot_age_s, drawn for each slot at its start between 0 and this, "
                "so slots forked together do not all leave together. Needs max_slot_age_s.")


def check_recycling(*, max_jobs: int, jobs_jitter: int, max_age_s: float, age_jitter_s: float) -> None:
    """A jitter without its limit does nothing: refused, naming both keys, rather than ignored
    (gunicorn ignores it), since it is most likely a limit left out by mistake."""
    if jobs_jitter and not max_jobs:
        raise ValueError(f"max_jobs_per_slot_jitter ({jobs_jitter}) needs max_jobs_per_slot "
                         "(0: no limit, so no jitter to add)")
    if age_jitter_s and not max_age_s:
        raise ValueError(f"max_slot_age_jitter_s ({age_jitter_s:g}) needs max_slot_age_s "
                         "(0: no limit, so no jitter to add)")
