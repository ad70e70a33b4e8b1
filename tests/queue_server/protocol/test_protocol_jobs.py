"""Hypothesis over the keyed-job commands' parsing: the client's encoders and the SYNC
records parse back to what was meant, and any token soup gives a command or a 400."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queue_server.protocol import job_requests as jreq
from queue_server.protocol import jobs as pj
from queue_server.protocol import requests as req
from queue_server.protocol.commands import Get, Put, parse_line
from queue_server.protocol.errors import ProtocolError
from queue_server.protocol.keyed import DeadJob, JobMeta, decode_errors, encode_errors, parse_key
from queue_server.protocol.numbers import ID_MAX
from queue_server.protocol.sync_records import SyncPut
from queue_server.server import records

names = st.text("abcXYZ019_", min_size=1, max_size=12)
producer_keys = st.from_regex(r"[A-Za-z0-9.:-][A-Za-z0-9_.:-]{0,20}", fullmatch=True)
server_keys = st.integers(1, 10**12)
keys = st.one_of(producer_keys, server_keys.map(lambda n: f"_{n}"))
ids = st.integers(1, ID_MAX)
seconds = st.one_of(st.integers(0, 10**6).map(float), st.floats(0, 10**6, allow_nan=False).map(
    lambda x: round(x, 3)))
unix = st.floats(0, 4e9, allow_nan=False, allow_infinity=False)
errors = st.binary(max_size=200)


def _parse(request: bytes) -> tuple[object, bytes]:
    line, _, block = request.partition(b"\r\n")
    parsed = parse_line(line)
    assert parsed.error is None
    if parsed.data_len >= 0:
        assert parsed.data_len == len(block)
        parsed.command.data = block  # type: ignore[union-attr]
    return parsed.command, block


@given(ids, errors, st.one_of(st.none(), seconds), st.booleans(), st.booleans())
def test_fail_requests_parse_back(job_id: int, error: bytes, delay_s: float | None, dead: bool, solo: bool) -> None:
    if delay_s is not None and dead:
        dead = False
    command, _block = _parse(jreq.fail_request(job_id, error, delay_s=delay_s, dead=dead, solo=solo))
    assert isinstance(command, pj.Fail)
    assert (command.job_id, command.dead, command.solo, command.data) == (job_id, dead, solo, error)
    assert command.delay_s == (None if delay_s is None else float(req.seconds(delay_s, what="d")))


@given(st.lists(ids, min_size=1, max_size=20), st.one_of(st.none(), seconds))
def test_touch_requests_parse_back(lease_ids: list[int], expire_s: float | None) -> None:
    command, _ = _parse(jreq.touch_request(lease_ids, expire_s=expire_s))
    assert isinstance(command, pj.Touch) and command.ids == tuple(lease_ids)
    assert (command.expire_s is None) == (expire_s is None)


@given(names, st.sampled_from(["ready", "delayed", "failed", "running", "dead"]),
       st.integers(1, 1000), st.one_of(st.none(), keys))
def test_jobs_requests_parse_back(queue: str, state: str, limit: int, after: str | None) -> None:
    command, _ = _parse(jreq.jobs_request(queue, state, limit=limit, after=after))
    assert command == pj.JobsList(queue, state, limit, None if after is None else parse_key(after.encode()))


@given(names, st.lists(keys, min_size=1, max_size=30))
def test_retry_and_delete_requests_parse_back(queue: str, job_keys: list[str]) -> None:
    wanted = tuple(parse_key(k.encode()) for k in job_keys)
    assert _parse(jreq.retry_request(queue, job_keys))[0] == pj.Retry(queue, wanted, None)
    assert _parse(jreq.delete_request(queue, job_keys))[0] == pj.Delete(queue, wanted, False)
    assert _parse(jreq.retry_all_request(queue, "failed"))[0] == pj.Retry(queue, (), "failed")
    assert _parse(jreq.delete_all_dead_request(queue))[0] == pj.Delete(queue, (), True)


@given(names, st.binary(max_size=50), st.one_of(st.none(), producer_keys), st.booleans())
def test_put_with_a_key_and_get_with_keys_parse_back(queue: str, data: bytes, key: str | None, new_item: bool) -> None:
    command, _ = _parse(req.put_request(queue, data, new_item=new_item, keyed=True, key_=key))
    assert isinstance(command, Put) and command.keyed and command.new_item == new_item
    assert command.key == key and command.data == data
    get, _ = _parse(req.get_request(queue, count=3, keys=True))
    assert isinstance(get, Get) and get.keys and get.count == 3


@given(ids, unix, st.one_of(st.none(), unix), st.booleans(), st.text(max_size=50))
def test_sync_fail_records_parse_back(job_id: int, at: float, until: float | None, solo: bool, error: str) -> None:
    command, _ = _parse(records.fail(job_id, at, until, solo, error))
    assert command == pj.SyncFail(job_id, at, until, solo, error.encode())


@given(names, st.integers(-(2**63), 2**63 - 1), st.binary(max_size=40), server_keys, st.integers(0, 30),
       st.lists(st.tuples(unix, st.integers(0, 30), st.text(max_size=40)), max_size=5), unix,
       st.booleans(), st.booleans())
def test_sync_put_and_dead_records_carry_key_attempts_and_error_history(
    queue: str, priority: int, data: bytes, key: int, attempts: int,
    errors: list[tuple[float, int, str]], at: float, solo: bool, waiting: bool,
) -> None:
    history = tuple(errors)
    meta = JobMeta(attempts, history, solo, waiting)
    command, _ = _parse(records.put(queue, priority, data, None, None, key, meta))
    assert isinstance(command, SyncPut)
    assert (command.key, command.attempts, command.solo, command.retry_wait) == (key, attempts, solo, waiting)
    block = encode_errors(history) if history else b""
    assert command.data == data + block and command.errors_len == (len(block) if history else -1)
    if history:
        assert decode_errors(command.data[len(data):]) == history
    dead = DeadJob(key, queue, priority, data, "it", attempts, history, at)
    command, _ = _parse(records.dead(dead))
    assert isinstance(command, pj.SyncDead)
    assert (command.key, command.attempts, command.died_at, command.item) == (key, attempts, at, "it")
    assert command.errors_len == (len(block) if history else -1)


WORDS = [b"FAIL", b"TOUCH", b"JOB", b"JOBS", b"RETRY", b"DELETE", b"ALL", b"DEAD", b"FAILED",
         b"SOLO", b"FRONT", b"DELAY", b"EXPIRE", b"LIMIT", b"AFTER", b"KEY", b"KEYS", b"*", b"q", b"_1",
         b"_01", b"ready", b"0", b"7", b"-1", b"1.5", b"a/b", b"\xff", b"SYNC", b"DROP", b"AT", b"UNTIL"]


@settings(max_examples=400)
@given(st.lists(st.one_of(st.sampled_from(WORDS), st.binary(min_size=1, max_size=4)), min_size=1, max_size=9))
def test_any_token_soup_is_a_command_or_a_400(words: list[bytes]) -> None:
    line = b" ".join(words)
    if not line.split():
        return
    try:
        parsed = parse_line(line)
    except ProtocolError as error:
        assert error.reply.startswith(b"400 ")
        return
    assert parsed.command is not None or (parsed.error is not None and parsed.data_len >= 0)


@pytest.mark.parametrize("raw", [b"", b"[]", b"{}", b"[[1, 2]]", b'[[1, -1, "x"]]', b'[["1", 1, "x"]]',
                                 b'[[NaN, 1, "x"]]', b'[[true, 1, "x"]]', b'[[1, 1.5, "x"]]',
                                 b"[" * 100_000 + b"]" * 100_000, b'[[1, 1, "x"]' + b', [1, 1, "x"]' * 50 + b"]",
                                 b'[[1, 99999999999999999999, "x"]]', b"\xff"])
def test_a_bad_errors_block_is_refused(raw: bytes) -> None:
    with pytest.raises((ValueError, UnicodeDecodeError)):
        decode_errors(raw)
