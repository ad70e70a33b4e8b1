"""Pure decisions at the queue server's door: cross-protocol lines, the AUTH penalty, loopback peers.

No I/O here: the connection (queue_server/server/connection.py) and the CLI ask these functions
and act on the answer, so every rule is tested without a socket.
"""
from __future__ import annotations

import ipaddress
import re

# A browser (or anything that speaks HTTP) made to send to this port starts with a request
# line and headers; the body after them would run as commands. Redis closes a connection
# whose command is `POST` or `Host:` for the same reason (networking.c,
# securityWarningCommand). Our command words never end with ':' (names are [A-Za-z0-9_]),
# so any header-like first word is safe to refuse too, and a line ending in ` HTTP/1.x`
# catches every request method, GET included, while `GET q` stays a sockPQd command.
_HTTP_REQUEST_LINE = re.compile(rb".*\sHTTP/[0-9](?:\.[0-9])?\s*", re.DOTALL)
_HEADER_WORD = re.compile(rb"[!-9;-~]+:")  # a token then ':' (RFC 9110 field name)

# Failed AUTH on one connection: the n-th 401 is held back AUTH_DELAY_S * 2**(n-1) seconds
# (0.1, 0.2, 0.4, 0.8, ...) and the connection is closed at the MAX_AUTH_FAILURES-th.
# One connection then tries 5 tokens in about 3 s; maxclients bounds the connections.
AUTH_DELAY_S = 0.1
AUTH_DELAY_MAX_S = 5.0
MAX_AUTH_FAILURES = 5


def cross_protocol(line: bytes) -> str | None:
    """What an HTTP-looking request line is (for the log), or None for anything else."""
    word = line.split(None, 1)[0] if line.strip() else b""
    if word.upper() == b"POST":
        return "an HTTP POST request line"
    if _HEADER_WORD.fullmatch(word):
        return "an HTTP header line"
    if _HTTP_REQUEST_LINE.fullmatch(line):
        return "an HTTP request line"
    return None


def auth_delay_s(failures: int) -> float:
    """How long the reply to the `failures`-th wrong AUTH of a connection is held back."""
    return min(AUTH_DELAY_S * 2 ** max(failures - 1, 0), AUTH_DELAY_MAX_S)


def peer_host(peer: object) -> str | None:
    """The host part of a peer address (from getpeername), None when there is none."""
    if not isinstance(peer, tuple) or not peer:
        return None
    return str(peer[0])


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:10.0.0.2 on a dual-stack socket
    return mapped or address


def same_host(claimed: str, actual: str) -> bool:
    """Whether a claimed ip is the one a connection comes from (a host name never is:
    resolving it would be trusting what it claims)."""
    left, right = _address(claimed), _address(actual)
    return left is not None and left == right


def is_loopback(peer: object) -> bool:
    """True for a peer address (from getpeername) on this machine."""
    if not isinstance(peer, tuple) or not peer:
        return False
    try:
        address = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return bool((mapped or address).is_loopback)
