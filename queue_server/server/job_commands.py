"""The keyed-job commands on the server: FAIL, TOUCH, JOB, JOBS, RETRY, DELETE.

Each is `handler(server, conn, command)`, an entry of the server's command table.
FAIL, TOUCH, RETRY and DELETE change the store and are refused offline like PUT;
JOB and JOBS only read it and answer offline too (like STATS).
"""
from __future__ import annotations

import time

from queue_server.protocol import jobs as pj
from queue_server.server import job_views, responses
from queue_server.server.faces import Conn, Server
from queue_server.server.job_search import search_jobs
from queue_server.server.store_types import UNNAMED_DOOR


def fail(server: Server, conn: Conn, command: pj.Fail) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    outcome = server.store.fail(command.job_id, command.data, time.time(), delay_s=command.delay_s,
                                dead=command.dead, solo=command.solo)
    conn.write(responses.JOB_NOT_FOUND if outcome is False else responses.fail_reply(outcome))  # type: ignore[arg-type]


def touch(server: Server, conn: Conn, command: pj.Touch) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    conn.write(responses.later_reply(server.store.touch(command.ids, time.time(), command.expire_s)))


def job(server: Server, conn: Conn, command: pj.JobLookup) -> None:
    view = job_views.job_view(server.store, command.key, with_errors=command.errors)
    conn.write(responses.JOB_NOT_FOUND if view is None else job_views.json_block(view))


def jobs(server: Server, conn: Conn, command: pj.JobsList) -> None:
    if command.search is not None:
        page = search_jobs(server.store, command.queue, command.state, command.limit, command.after,
                           command.search, command.at)
        conn.write(job_views.json_block(page))
        return
    found = job_views.jobs_view(server.store, command.queue, command.state, command.limit, command.after,
                                command.at)
    conn.write(job_views.json_block(found))


def retry(server: Server, conn: Conn, command: pj.Retry) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    store = server.store
    now = time.time()
    door = conn.door or UNNAMED_DOOR
    if command.all_of is not None:
        conn.write(responses.count_reply(store.retry_all(command.queue, command.all_of, now, door)))
    else:
        conn.write(responses.later_reply(store.retry(command.queue, command.keys, now, door)))


def delete(server: Server, conn: Conn, command: pj.Delete) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    store = server.store
    door = conn.door or UNNAMED_DOOR
    if command.all_dead:
        conn.write(responses.count_reply(store.delete_all_dead(command.queue, door)))
    else:
        conn.write(responses.delete_reply(store.delete(command.queue, command.keys, door)))


def client_name(server: Server, conn: Conn, command: pj.ClientName) -> None:
    """CLIENT NAME <name>: the door this connection's RETRY and DELETE are counted under,
    and who runs the jobs it takes."""
    conn.door = command.name
    conn.door_by = b" BY " + command.name.encode("ascii")
    conn.write(responses.OK)
