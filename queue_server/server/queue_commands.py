"""The queue commands on the server: PUT, GET, DONE, LATER, SYNC records, and serving the
waiters a change wakes.

Each command is `handler(server, conn, command)`, an entry of COMMANDS (below), the table
server.py dispatches through; the plain PUT's hot path stays in server.py (`put_plain`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from queue_server.protocol import cancels
from queue_server.protocol import commands as p
from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.protocol.keyed import JobMeta, Meta
from queue_server.server import cancel, control, job_commands, replay, responses, results
from queue_server.server.faces import Conn, Server


def sync(server: Server, conn: Conn, command: replay.SyncCommand) -> None:
    conn.write(replay.apply(server.store, command, time.time()))


def done(server: Server, conn: Conn, command: p.Done) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
    else:
        conn.write(responses.done_reply(server.store.done(command.ids, conn.door)))


def put(server: Server, conn: Conn, command: p.Put) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    store = server.store
    now = time.time()
    if command.key is not None:  # a unique job: a live job with this key means no new job
        existing = store.state_of(command.key)
        if existing is not None and existing != "dead":
            # Keys are one namespace over all queues: a producer told only "EXISTS" could not
            # tell that its job is not in the queue it put to. Named only then, so the reply
            # of a duplicate in its own queue stays what clients of older releases parse.
            holder = store.queue_of(command.key)
            elsewhere = holder if holder != command.queue else None
            conn.write(responses.key_reply(responses.OK, command.key, existing, elsewhere))
            return
    item = store.new_item_name() if command.new_item else command.item
    until = now + command.delay_s if command.delay_s else None
    ttl_at = None if command.ttl_s is None else (until or now) + command.ttl_s
    meta: Meta = 0 if command.trace is None else JobMeta(0, trace=command.trace)
    key = store.put(command.queue, command.priority, command.data, item, now, until=until,
                    key=command.key, ttl_at=ttl_at, meta=meta)
    if until is None and item is not None:
        _deliver_output(server, command.queue, command.priority, item, now)
    if command.wait_queue is None:
        reply = responses.OK if not command.new_item else responses.item_reply(responses.OK, item)  # type: ignore[arg-type]
        conn.write(responses.key_reply(reply, key) if command.keyed else reply)
        return
    assert item is not None
    reply = responses.WAIT_FOR_OUTPUT
    if command.new_item:
        reply = responses.item_reply(reply, item)
    conn.write(responses.key_reply(reply, key) if command.keyed else reply)
    waiter = server.waiters.add_output(conn, command.wait_queue, item, command.expire_s, command.then_done)
    conn.block(waiter)


def _deliver_output(server: Server, queue: str, priority: int, item: str, now: float) -> None:
    """A PUT ... WAIT client gets its item's output job before any GET can."""
    waiter = server.waiters.output_waiter(queue, item)
    while waiter is not None and waiter.conn.peer_gone():
        server.waiters.remove(waiter)
        waiter = server.waiters.output_waiter(queue, item)
    if waiter is not None:
        job = server.store.take_last(queue, priority, now, waiter.expire_s, waiter.then_done,
                                     waiter.conn.door_by)
        server.answer(waiter, responses.job_reply(job))


def get(server: Server, conn: Conn, command: p.Get) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    store = server.store
    jobs = store.take(command.queues, command.count or 1, time.time(), command.expire_s,
                      command.then_done, command.keys, conn.door_by)
    if jobs:
        conn.write_parts(responses.job_reply(jobs[0], command.keys, command.traces)
                         if command.count is None
                         else responses.batch_reply(jobs, command.keys, command.traces))
        return
    if command.mode is p.GetMode.NOW or (
        command.mode is p.GetMode.UNTIL_IDLE and not store.has_running(command.queues)
    ):
        conn.write(responses.QUEUE_EMPTY)
        return
    conn.block(server.waiters.add_get(conn, command))


def later(server: Server, conn: Conn, command: p.Later) -> None:
    if server.offline:
        conn.write(responses.OFFLINE)
        return
    now = time.time()
    until = now + command.delay_s if command.delay_s is not None else None
    conn.write(responses.later_reply(server.store.later(command.ids, now, until, solo=command.solo,
                                                                   front=command.front)))


def settle(server: Server) -> None:
    """Serve blocked clients after jobs became ready or queues stopped running."""
    store = server.store
    woken, store.woken = store.woken, []
    idled, store.idled = store.idled, []
    if not server.waiters.count or server.offline:
        return  # a replica applying the primary's records, or offline: no hand-out here
    now = time.time()
    for state in woken:
        while state.ready:
            waiter = server.waiters.first_for_queue(state.name)
            if waiter is None or waiter.get is None:
                break
            if waiter.conn.peer_gone():
                server.waiters.remove(waiter)
                continue
            get = waiter.get
            jobs = store.take(get.queues, get.count or 1, now, get.expire_s, get.then_done, get.keys,
                              waiter.conn.door_by)
            server.answer(waiter, responses.job_reply(jobs[0], get.keys, get.traces)
                          if get.count is None else responses.batch_reply(jobs, get.keys, get.traces))
    for state in idled:
        for waiter in server.waiters.until_idle_for(state.name):
            assert waiter.get is not None
            if not store.has_running(waiter.get.queues) and not store.has_ready(waiter.get.queues):
                server.answer(waiter, responses.QUEUE_EMPTY)


def _control(server: Server, conn: Conn, command: p.Command) -> None:
    control.execute(server, conn, command)


Handler = Callable[["Server", "Conn", Any], None]
# The command table: a command object's type -> what runs it. Control commands (TOTAL,
# STATS, AUTH, SNAPSHOT, ...) fall through to control.execute (CONTROL).
COMMANDS: dict[type, Handler] = {
    p.Put: put,
    p.Get: get,
    p.Done: done,
    p.Later: later,
    pj.Fail: job_commands.fail,
    pj.Touch: job_commands.touch,
    pj.JobLookup: job_commands.job,
    pj.JobsList: job_commands.jobs,
    pj.Retry: job_commands.retry,
    pj.Delete: job_commands.delete,
    pj.Cancel: cancel.cancel,
    cancels.CancelledSince: cancel.cancelled,
    pj.ClientName: job_commands.client_name,
    fin.DoneWithResult: results.done_with_result,
    fin.ResultWait: results.result,
    **{kind: sync for kind in replay.SYNC_TYPES},
}
CONTROL: Handler = _control
SYNC_TYPES = frozenset(replay.SYNC_TYPES)  # their records are never replicated onward
