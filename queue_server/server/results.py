"""DONE ... RESULT and RESULT <q> <key> [TIMEOUT <s>] (PROTOCOL.md Part B "Finished jobs
and results").

A RESULT on a job that has not ended blocks its connection, as GETB does, until the job
is done, dead or deleted, or TIMEOUT runs out: the store tells which watched keys ended
(its `ended` outbox, filled only for keys someone waits on), so nothing polls.
"""
from __future__ import annotations

import asyncio
from typing import Any

from queue_server.protocol import finished as fin
from queue_server.server import job_views, responses
from queue_server.server.faces import Conn, Server
from queue_server.server.waiters import Waiter

ENDED_STATES = frozenset(("done", "dead"))


def done_with_result(server: Server, conn: Conn, command: fin.DoneWithResult) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    store = server.store
    job = store.running.get(command.job_id)
    result: bytes | int = command.data if command.large is None else command.large
    if job is not None and len(command.data) > store.policy(job.queue.name).max_result_bytes:
        result = len(command.data)  # not kept: the finished job says how large it was
    conn.write(responses.done_reply(store.done((command.job_id,), conn.door, result)))


def _view(server: Server, wait: fin.ResultWait) -> dict[str, Any] | None:
    view = job_views.job_view(server.store, wait.key)
    if view is not None and view["queue"] == wait.queue:
        return view
    # The key's job now is another queue's (or none): this queue may keep it finished still.
    # Else a key finished in thumbnails and put again in notify answered 404 for thumbnails'
    # result, which JOBS thumbnails done listed.
    return job_views.kept_view(server.store, wait.key, wait.queue)


def _reply(view: dict[str, Any] | None) -> bytes:
    return responses.JOB_NOT_FOUND if view is None else job_views.json_block(view)


def result(server: Server, conn: Conn, command: fin.ResultWait) -> None:
    view = _view(server, command)
    if view is None or view["state"] in ENDED_STATES or not command.timeout_s:
        conn.write(_reply(view))
        return
    waiter = server.waiters.add_result(conn, command)
    waiter.timer = asyncio.get_running_loop().call_later(
        command.timeout_s, lambda: _time_out(server, waiter))
    conn.block(waiter)


def _time_out(server: Server, waiter: Waiter) -> None:
    if waiter.active:
        assert waiter.result is not None
        waiter.timer = None
        server.answer(waiter, _reply(_view(server, waiter.result)))


def answer_ended(server: Server) -> None:
    """Answer the RESULT waits on keys that ended since the last look (server._after_change)."""
    store = server.store
    ended, store.ended = store.ended, []
    for key in dict.fromkeys(ended):
        group = server.waiters.results.get(key)
        for waiter in list(group.values()) if group else ():
            assert waiter.result is not None
            view = _view(server, waiter.result)
            if view is None or view["state"] in ENDED_STATES:
                server.answer(waiter, _reply(view))
