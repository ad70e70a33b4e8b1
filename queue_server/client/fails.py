"""FAIL of several running jobs in one round trip (the requests pipelined), for a slot's
batch: one of the operations of queue_server/client/operations.py, in a module of its own."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

from queue_server.client import wait_check
from queue_server.client.core import CLIENT_TIMEOUT
from queue_server.client.effects import Op, Read, Send, Sleep
from queue_server.client.follow import follow_pause
from queue_server.client.operations import Client
from queue_server.protocol import job_requests as jreq
from queue_server.protocol.client_errors import BadReply, QueueServerError
from queue_server.protocol.job_info import FailResult
from queue_server.protocol.job_replies import parse_fail

NOT_FOUND: Final = 404


def fail_many(client: Client, failures: Sequence[jreq.FailRequest], *,
              until: float | None = None) -> Op[list[FailResult | None]]:
    """FAIL several running jobs in one round trip (the requests pipelined); per job its
    FailResult, or None when it was not running (`404 Job Not Found`). Every reply is read
    before another error reply is raised, so the connection stays in step. `until`: as
    done()'s, for all of them."""
    if not failures:
        return []
    data = b"".join(jreq.fail_request(f.id, f.error, delay_s=f.delay_s, dead=f.dead, solo=f.solo)
                    for f in failures)
    follow_s = None if until is None else client._follow_check_s(CLIENT_TIMEOUT)
    while True:
        try:
            return (yield from _fail_pipelined(client, data, len(failures), until, follow_s))
        except QueueServerError as exc:
            pause = follow_pause(exc, until, time.monotonic())
            if pause is None:
                raise
            client._drop()
            yield Sleep(pause)


def _fail_pipelined(client: Client, data: bytes, count: int, until: float | None,
                    follow_s: float | None) -> Op[list[FailResult | None]]:
    """One try of fail_many: the `count` FAILs of `data` on the connection in use; with
    `until`, a late reply is waited for while the server answers (wait_check.py held_reply)."""
    conn = yield from client._ready()
    results: list[FailResult | None] = []
    refused: QueueServerError | None = None
    try:
        yield Send(conn, data)
        for _ in range(count):
            try:
                if until is None or follow_s is None:
                    results.append((yield Read(conn, parse_fail, CLIENT_TIMEOUT)))
                else:
                    results.append((yield from wait_check.followed_read(
                        client, conn, parse_fail, until=until, check_s=follow_s)))
            except QueueServerError as exc:
                if isinstance(exc, BadReply):
                    raise
                refused = refused or (None if exc.code == NOT_FOUND else exc)
                results.append(None)
    except BaseException as exc:  # interrupted: a late reply would answer the next request
        client._drop()
        client._raise_failed(conn, "FAIL", exc)
    if refused is not None:
        raise refused
    return results
