"""Pure parsers of request fields (names, keywords); raise ProtocolError (400). Numbers,
times and ids: numbers.py."""
from __future__ import annotations

import re

from queue_server.protocol.errors import bad_request

_NAME = re.compile(rb"[A-Za-z0-9_]{1,128}")
NEW_KEYWORD = b"NEW"  # PUT ... NEW and SYNC PUT ... NEW: the server names the item


def parse_name(raw: bytes, what: str = "queue name") -> str:
    if _NAME.fullmatch(raw) is None:
        raise bad_request(f"bad {what}")
    return raw.decode("ascii")


def parse_then(raw: bytes) -> bool:
    if raw == b"DONE":
        return True
    if raw == b"LATER":
        return False
    raise bad_request("THEN must be DONE or LATER")


def parse_queue_list(raw: bytes) -> tuple[str, ...]:
    names = raw.split(b"|")
    return tuple(parse_name(name) for name in names)


def keyword_values(args: list[bytes], allowed: frozenset[bytes]) -> dict[bytes, bytes]:
    """Pairs `KEY value` in any order; each key at most once."""
    if len(args) % 2:
        raise bad_request(f"{args[-1].decode('ascii', 'replace')} needs a value")
    found: dict[bytes, bytes] = {}
    for index in range(0, len(args), 2):
        key = args[index]
        if key not in allowed:
            raise bad_request(f"unexpected {key.decode('ascii', 'replace')}")
        if key in found:
            raise bad_request(f"{key.decode('ascii', 'replace')} given twice")
        found[key] = args[index + 1]
    return found
