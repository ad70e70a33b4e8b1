"""A role bound to some queues (`<role>_queues`) and the commands naming a job rather than a
queue: DONE, LATER, FAIL, TOUCH (lease ids) and JOB (a key). Lease ids count up from 1, so a
worker bound to `mail*` could finish, fail or extend any queue's running job by guessing its
id, and JOB handed any queue's job data to whoever knew a key; the job's own queue is checked
here, as PUT's and GET's are in grants.py. Only for such a grant (grants.NAMES_JOBS keeps
these commands off its free list): an unlimited or unbound connection never comes here."""
from __future__ import annotations

from queue_server.protocol import commands as p
from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.server.grants import Grant
from queue_server.server.job_views import job_view
from queue_server.server.store import Store


def foreign_job(store: Store, grant: Grant, command: p.Command) -> str | None:
    """Why `grant` may not touch the job `command` names (a refusal's text), or None. An id
    or key the store does not know passes: the command's own reply says it is unknown."""
    if grant.queues is None:
        return None
    if isinstance(command, pj.JobLookup):
        view = job_view(store, command.key)
        if view is None or grant.may_touch(view["queue"]):
            return None
        return f"JOB: the job is in a queue not among the {grant.role.value} role's queues"
    if isinstance(command, (pj.Fail, fin.DoneWithResult)):
        ids: tuple[int, ...] = (command.job_id,)
    elif isinstance(command, (p.Done, p.Later, pj.Touch)):
        ids = command.ids
    else:
        return None
    running = store.running
    for job_id in ids:
        job = running.get(job_id)
        if job is not None and not grant.may_touch(job.queue.name):
            return f"lease {job_id} is in a queue not among the {grant.role.value} role's queues"
    return None
