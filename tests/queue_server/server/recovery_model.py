"""Random VALID requests for the recovery property test (test_recovery_property.py): every
command and option that changes a queue server's state, with numbers anywhere in their
bounds (queue_server/protocol/numbers.py), sent over a raw socket with their replies read
exactly; and a dump of the whole state (JOBS of every queue and state, TOTAL, the counters)
to compare before and after a restart, a CLONE, or on a replica.

Durations are 0 or at least an hour, so no deadline passes while a test runs: the state
only changes by requests, and two dumps of the same state are equal."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from queue_server.protocol import numbers
from queue_server.protocol import requests as req
from tests.conftest import RawClient

QUEUES = ("q0", "q1", "q2")
OUTPUT = "out0"  # where PUT ... WAIT waits
STATES = ("ready", "delayed", "failed", "running", "dead", "done")
MAX_ATTEMPTS = 3
CONFIG = "[queue_server]\nsnapshot_log_bytes = 4096\n" + "".join(
    f"[queues.{name}]\nlock_timeout_s = 86400\nretry_base_s = 86400\nretry_max_s = 86400\n"
    f"max_attempts = {MAX_ATTEMPTS}\n" for name in (*QUEUES, OUTPUT))
JOB_HEAD = re.compile(
    rb"(?:200 OK )?([A-Za-z0-9_]+) ([0-9]+) (-?[0-9]+) ([0-9]+)(?: IS [A-Za-z0-9_]+)?(?: KEY \S+ ATTEMPT [0-9]+)?")

def _now_and_then_over(good: st.SearchStrategy[str], over: list[str]) -> st.SearchStrategy[str]:
    """Mostly `good`; one draw in ten a number past its bound, which the door must refuse
    with a 400 and never store (f5016ee acknowledged a 400-digit DELAY, then lost the log)."""
    return st.integers(0, 9).flatmap(lambda n: st.sampled_from(over) if n == 0 else good)


priorities = _now_and_then_over(
    st.one_of(st.integers(-3, 3), st.integers(numbers.INT64_MIN, numbers.INT64_MAX),
              st.sampled_from([numbers.INT64_MIN, numbers.INT64_MAX])).map(str),
    [str(numbers.INT64_MAX + 1), "9" * 5000])
long_seconds = _now_and_then_over(
    st.one_of(st.integers(3600, numbers.MAX_SECONDS), st.floats(3600, numbers.MAX_SECONDS),
              st.just(numbers.MAX_SECONDS)).map(lambda s: req.seconds(s, what="s").decode()),
    [str(numbers.MAX_SECONDS + 1), "9" * 400, "1" + "0" * 30 + ".5"])
delays = st.one_of(st.just("0"), long_seconds)
far_ids = _now_and_then_over(st.integers(1, numbers.ID_MAX).map(str), [str(numbers.ID_MAX + 1), "7" * 5000])
producer_keys = st.sampled_from(["k1", "k2", "k3", "a.b:c-d"])
queues = st.sampled_from(QUEUES)
datas = st.binary(max_size=40)


@dataclass
class Session:
    """What the requests so far told the test: lease ids and keys to name in later ones."""

    client: RawClient
    ids: list[int] = field(default_factory=list)
    keys: list[str] = field(default_factory=lambda: ["k1", "_1"])
    sent: list[bytes] = field(default_factory=list)  # what was sent, cut, for a failure's report

    def send(self, request: bytes, client: RawClient | None = None) -> None:
        self.sent.append(request[:160])
        (client or self.client).send(request)


def _reply_keys(session: Session, reply: bytes) -> None:
    words = reply.split()
    if b"KEY" in words:
        session.keys.append(words[words.index(b"KEY") + 1].decode())


def _read_jobs(session: Session, batch: bool) -> None:
    """A GET reply: 404, one job, or a batch; every lease id is remembered."""
    client = session.client
    head = client.line()
    if head == b"404 Queue Empty" or _refused(head):
        return
    if not batch:
        _take_job(session, head)
        return
    match = re.fullmatch(rb"200 OK ([0-9]+) JOBS", head)
    assert match, head
    for _ in range(int(match[1])):
        _take_job(session, session.client.line())


def _take_job(session: Session, head: bytes, client: RawClient | None = None) -> None:
    match = JOB_HEAD.fullmatch(head)
    assert match, head
    (client or session.client).exact(int(match[4]))
    session.ids.append(int(match[2]))


def _pick(draw: st.DrawFn, known: list[Any], fallback: Any) -> Any:
    """One of `known`, drawn the same way whatever the server answered before (Hypothesis
    replays a draw sequence; a choice among a list whose length varies would not replay)."""
    index = draw(st.integers(0, 1000))
    return known[index % len(known)] if known else fallback


def _ids(draw: st.DrawFn, session: Session) -> list[str]:
    count = draw(st.integers(1, 3))
    return [str(_pick(draw, session.ids, 1)) if draw(st.integers(0, 4)) else draw(far_ids) for _ in range(count)]


def _refused(reply: bytes) -> bool:
    """A number past its bound: the whole request is refused, one line naming the bound."""
    if reply.startswith(b"400 "):
        assert re.fullmatch(rb"400 Bad Request: .*(must be|out of 64-bit range).*", reply), reply
        return True
    return False


def put(draw: st.DrawFn, session: Session) -> None:
    data = draw(datas)
    words = [f"PUT {draw(queues)} {draw(priorities)} {len(data)}"]
    item = draw(st.sampled_from(["", "IS it1", "IS _7", "NEW"]))
    words += [item] if item else []
    delay = draw(st.one_of(st.none(), delays))
    words += [f"DELAY {delay}"] if delay is not None else []
    key = draw(st.one_of(st.none(), st.just("*"), producer_keys))
    words += [f"KEY {key}"] if key is not None else []
    ttl = draw(st.one_of(st.none(), long_seconds))
    words += [f"TTL {ttl}"] if ttl is not None else []
    order = draw(st.permutations(words[1:]))  # keywords after <len> in any order
    session.send(" ".join([words[0], *order]).encode() + b"\r\n" + data)
    reply = session.client.line()
    assert reply.startswith(b"200 OK") or _refused(reply), reply
    _reply_keys(session, reply)


def put_wait(draw: st.DrawFn, session: Session, waiter: RawClient) -> None:
    """PUT ... NEW WAIT on a second connection, then the output job that it gets."""
    data = draw(datas)
    expire = draw(st.one_of(st.just(""), long_seconds.map(lambda s: f" EXPIRE {s}")))
    then = draw(st.sampled_from(["", " THEN DONE", " THEN LATER"])) if expire else ""
    output = draw(datas)  # drawn before any reply: the draws must not depend on the server
    priority = draw(st.integers(numbers.INT64_MIN, numbers.INT64_MAX))
    session.send(f"PUT {draw(queues)} {draw(priorities)} {len(data)} NEW WAIT {OUTPUT}{expire}{then}"
                 .encode() + b"\r\n" + data, waiter)
    reply = waiter.line()
    if _refused(reply):
        return
    match = re.fullmatch(rb"206 Wait for output IS (_[0-9]+)", reply)
    assert match, reply
    session.send(b"PUT %s %d %d IS %s\r\n" % (OUTPUT.encode(), priority, len(output), match[1]) + output)
    assert session.client.line() == b"200 OK"
    _take_job(session, waiter.line(), waiter)


def get(draw: st.DrawFn, session: Session) -> None:
    names = draw(st.lists(st.sampled_from((*QUEUES, OUTPUT)), max_size=3, unique=True))
    count = draw(st.one_of(st.none(), st.integers(1, 4), st.just(numbers.COUNT_MAX)))
    words = ["GET"] + (["|".join(names)] if names else [])
    words += [f"COUNT {count}"] if count is not None else []
    expire = draw(st.one_of(st.none(), long_seconds))
    if expire is not None:
        words += [f"EXPIRE {expire}", *draw(st.sampled_from([[], ["THEN", "DONE"], ["THEN", "LATER"]]))]
    words += ["KEYS"] if draw(st.booleans()) else []
    session.send(" ".join(words).encode() + b"\r\n")
    _read_jobs(session, batch=count is not None)


def _lines(session: Session, request: str, count: int, pattern: bytes) -> None:
    session.send(request.encode() + b"\r\n")
    for _ in range(count):
        reply = session.client.line()
        if _refused(reply):
            return
        assert re.fullmatch(pattern, reply), (request[:200], reply)


def done(draw: st.DrawFn, session: Session) -> None:
    ids = _ids(draw, session)
    if draw(st.booleans()):  # one job with a result (issue 26: kept with the finished job)
        result = draw(st.binary(max_size=30))
        session.send(f"DONE {ids[0]} RESULT {len(result)}".encode() + b"\r\n" + result)
        reply = session.client.line()
        assert re.fullmatch(rb"200 OK( FINQ)?( FINI)?|404 Job Not Found", reply) or _refused(reply), reply
        return
    _lines(session, "DONE " + " ".join(ids), len(ids), rb"200 OK( FINQ)?( FINI)?|404 Job Not Found")


def later(draw: st.DrawFn, session: Session) -> None:
    ids = _ids(draw, session)
    delay = draw(st.one_of(st.none(), delays))
    request = "LATER " + " ".join(ids) + (f" DELAY {delay}" if delay is not None else "")
    if delay is None and draw(st.booleans()):  # back at the head (a crashed batch's never started)
        request += draw(st.sampled_from([" FRONT", " SOLO FRONT"]))
    _lines(session, request, len(ids), rb"200 OK|404 Job Not Found")


def touch(draw: st.DrawFn, session: Session) -> None:
    ids = _ids(draw, session)
    expire = draw(st.one_of(st.none(), long_seconds))
    request = "TOUCH " + " ".join(ids) + (f" EXPIRE {expire}" if expire is not None else "")
    _lines(session, request, len(ids), rb"200 OK|404 Job Not Found")


def fail(draw: st.DrawFn, session: Session) -> None:
    [job_id] = _ids(draw, session)[:1]
    error = draw(st.binary(max_size=30))
    how = draw(st.sampled_from(["", " DEAD", f" DELAY {draw(delays)}"]))
    solo = " SOLO" if draw(st.booleans()) else ""
    session.send(f"FAIL {job_id}{how}{solo} {len(error)}".encode() + b"\r\n" + error)
    reply = session.client.line()
    assert re.fullmatch(rb"200 OK( DEAD| RETRY [0-9.e+]+)?|404 Job Not Found", reply) or _refused(reply), reply


def retry_or_delete(draw: st.DrawFn, session: Session) -> None:
    verb = draw(st.sampled_from(["RETRY", "DELETE"]))
    queue = draw(queues)
    everything = draw(st.sampled_from(["ALL DEAD", "ALL FAILED"] if verb == "RETRY" else ["ALL DEAD"]))
    if draw(st.booleans()):
        _lines(session, f"{verb} {queue} {everything}", 1, rb"200 OK [0-9]+")
        return
    keys = [_pick(draw, session.keys, "k1") for _ in range(draw(st.integers(1, 3)))]
    _lines(session, f"{verb} {queue} " + " ".join(keys), len(keys), rb"200 OK|404 Job Not Found|409 Job Running")


def client_name(draw: st.DrawFn, session: Session) -> None:
    """Later hand-outs on this connection are run by that name (SYNC GET ... BY, JOB's running_by)."""
    name = draw(st.sampled_from(["slot.host-a.3", "slot.a.b.c.12", "cli.ops", "w:1"]))
    session.send(f"CLIENT NAME {name}\r\n".encode())
    assert session.client.line() == b"200 OK"


ACTIONS = (put, put, get, get, done, later, touch, fail, retry_or_delete, client_name)


def dump(client: RawClient) -> dict[str, Any]:
    """The state as requests see it: every job of every queue in every state (in listing
    order), TOTAL, and the id, item and key counters (a snapshot's SYNC IDS)."""
    pairs = [(queue, state) for queue in (*QUEUES, OUTPUT) for state in STATES]
    client.send(b"".join(b"JOBS %s %s LIMIT 1000\r\n" % (q.encode(), s.encode()) for q, s in pairs)
                + b"TOTAL\r\nSNAPSHOT\r\n")
    state: dict[str, Any] = {}
    for queue, name in pairs:
        head = client.line()
        assert head.startswith(b"200 OK "), head
        jobs = json.loads(client.exact(int(head.split()[2])))
        for job in jobs:
            # A row's place in its listing is the serving store's own (a restart, a CLONE and a
            # replica place rows anew: PROTOCOL.md Part B, JOBS positions); the rest must agree.
            assert job.pop("position")
        state[f"{queue} {name}"] = jobs
    state["TOTAL"] = client.line()
    head = client.line()
    snapshot = client.exact(int(head.split()[2]))
    state["SYNC IDS"] = snapshot.split(b"\r\n")[1]
    return state


def running_ids(state: dict[str, Any]) -> list[int]:
    return sorted(job["lease_id"] for queue in (*QUEUES, OUTPUT) for job in state[f"{queue} running"])
