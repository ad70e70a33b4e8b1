"""SYNC <record> lines as commands (the log, snapshots and replication share them; the
records themselves are written by queue_server/server/records.py)."""
from __future__ import annotations

from collections.abc import Callable

from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.protocol import sync_records as sr
from queue_server.protocol.command_types import Command, Parsed
from queue_server.protocol.errors import ProtocolError, bad_request
from queue_server.protocol.numbers import parse_counter, parse_ids, parse_length, parse_unix_time


def with_block(parse: Callable[[list[bytes]], tuple[Command, int]], rest: list[bytes]) -> Parsed:
    command, data_len = parse(rest)
    return Parsed(command, data_len)


def parse_sync(args: list[bytes]) -> Parsed:
    if not args:
        raise bad_request("SYNC needs a command")
    verb, rest = args[0], args[1:]
    if verb == b"PUT":
        if len(rest) < 3:
            raise bad_request("SYNC PUT <q> <p> <len> expected")
        data_len = parse_length(rest[2])
        try:
            return Parsed(sr.parse_sync_put(rest, data_len), data_len)
        except ProtocolError as error:
            return Parsed(None, data_len, error)
    if verb == b"GET":
        return Parsed(sr.parse_sync_get(rest))
    if verb == b"DONE":
        return with_block(fin.parse_sync_done, rest)
    if verb == b"PRUNE" and len(rest) == 1:
        return Parsed(fin.SyncPrune(parse_unix_time(rest[0])))
    if verb == b"KEPT":
        return with_block(fin.parse_sync_kept, rest)
    if verb == b"LATER":
        front = rest[-1:] == [b"FRONT"]
        if front:
            rest = rest[:-1]
        solo = rest[-1:] == [b"SOLO"]
        if solo:
            rest = rest[:-1]
        until = None
        if len(rest) >= 2 and rest[-2] == b"UNTIL":
            until = parse_unix_time(rest[-1])
            rest = rest[:-2]
        return Parsed(sr.SyncLater(parse_ids(rest), until, solo, front))
    if verb == b"WAKE" and len(rest) == 1:
        return Parsed(sr.SyncWake(parse_unix_time(rest[0])))
    if verb == b"IDS" and len(rest) in (2, 3):
        return Parsed(sr.SyncIds(*(parse_counter(raw) for raw in rest)))
    if verb == b"FAIL":
        return with_block(pj.parse_sync_fail, rest)
    if verb == b"TOUCH":
        return Parsed(pj.parse_sync_touch(rest))
    if verb in (b"RETRY", b"DELETE", b"DROP", b"TTL"):
        return Parsed(pj.parse_sync_keyed(verb, rest))
    if verb == b"DEAD":
        return with_block(pj.parse_sync_dead, rest)
    raise bad_request("unknown SYNC command")
