"""What became of a job whose outcome (DONE, LATER, FAIL) the queue server found not running
(pure; slot/source.py asks JOB <key> and logs the verdict).

Why: through a failover the slot sends an outcome again to the new primary
(queue_server/client/follow.py). If the first one reached the old primary, which applied it
and replicated it before it died, the new primary answers `404` (DONE: not found) for a
lease that is already settled: that is success, not a loss. The job's key tells the two
apart, since the lease id alone cannot (it is gone either way):
- DONE: the key's finished job of this attempt (issue 26: kept a while), or no job under
  the key (not kept), is the DONE applied; a job waiting or running under it lost its lock
  (it runs again, with an attempt charged);
- LATER: the job waiting (ready or delayed) with this hand-out's attempt count is the
  LATER applied; FAIL: the job failed or dead with this attempt count and an error not
  the server's own `lock expired ...` is the FAIL applied;
- anything else is a lock lost, logged as a warning as before. A job finished by a second
  run after its lock expired, or a producer's new job under the same key, reads the same
  as the first outcome applied or a lock lost: the verdict only chooses the log line.
"""
from __future__ import annotations

import logging
from typing import Final

from queue_server.protocol.job_info import JobInfo
from queue_server.protocol.replies import Job

LOCK_EXPIRED: Final = "lock expired"


def applied(verb: str, job: Job, info: JobInfo | None) -> bool:
    """Whether what JOB says of the job's key is this outcome, applied already."""
    if verb == "DONE":  # kept as a finished job of this attempt, or not kept at all
        return info is None or (info.state == "done" and info.attempts == job.attempt)
    if info is None or info.attempts != job.attempt:
        return False
    if verb == "LATER":
        return info.state in ("ready", "delayed")
    return info.state in ("failed", "dead") and not (info.error or "").startswith(LOCK_EXPIRED)


def not_running(verb: str, job_id: int, job: Job | None, info: JobInfo | str | None) -> tuple[int, str]:
    """(log level, line) for an outcome `verb` of `job_id` answered "not running"; `info`:
    JOB's answer for the job's key, or why there is none (a text)."""
    if job is None or isinstance(info, str):
        why = "no key to look it up" if job is None or job.key is None else str(info)
        return logging.WARNING, (f"{verb} {job_id}: the job was no longer running ({why}): its lock "
                                 "may have expired, and the job then runs again")
    name = f"{verb} {job_id} (key {job.key}, attempt {job.attempt})"
    if applied(verb, job, info):
        return logging.INFO, (f"{name}: already applied: the first {verb} reached the primary, "
                              "which replicated it before a failover")
    now = "no job under its key" if info is None else f"now {info.state}, attempt {info.attempts}"
    return logging.WARNING, f"{name}: the job was no longer running, its lock was lost ({now})"
