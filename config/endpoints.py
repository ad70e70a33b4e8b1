"""Addresses and secrets as the config accepts them: pure checks that raise ValueError with the reason.

Everything here runs while the config is validated, so a bad listen address or token
stops a process before it takes a lock, migrates a database or writes a data directory.
"""
from __future__ import annotations

import ipaddress
import re

# RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens.
_HOST_NAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")
_DOTTED_NUMBERS = re.compile(r"^[0-9.]+$")
ZMQ_TRANSPORTS = ("tcp", "ipc", "inproc")
# A token travels as `AUTH <token>` on one protocol line and as an HTTP header value:
# visible ASCII without spaces is what every client can send unchanged.
_TOKEN = re.compile(r"^[\x21-\x7e]+$")
MIN_TOKEN_CHARS = 1


def check_host(host: str) -> str:
    """An IP address or a host name (what a socket can be bound to or connect to)."""
    if not host:
        raise ValueError("empty host")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if _DOTTED_NUMBERS.fullmatch(host):
        raise ValueError(f"{host!r} is not an IPv4 address")
    if not _HOST_NAME.fullmatch(host):
        raise ValueError(f"{host!r} is neither an IP address nor a host name")
    return host


def parse_zmq_endpoint(value: str) -> tuple[str, str]:
    """`tcp://HOST:PORT` (HOST may be `*`), `ipc://PATH` or `inproc://NAME` -> (transport, address)."""
    transport, sep, address = value.partition("://")
    if not sep or transport not in ZMQ_TRANSPORTS:
        raise ValueError(f"expected tcp://HOST:PORT, ipc://PATH or inproc://NAME, got {value!r}")
    if not address:
        raise ValueError(f"no address after {transport}:// in {value!r}")
    if transport != "tcp":
        return transport, address
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"expected tcp://HOST:PORT with a port 1..65535, got {value!r}")
    host = host.strip("[]")
    if host != "*":
        check_host(host)
    return transport, address


def check_token(value: str, *, what: str) -> str:
    """A token a client can send: non-empty, visible ASCII, no spaces (else the error says why)."""
    if len(value) < MIN_TOKEN_CHARS:
        raise ValueError(f"{what} is empty: leave it unset to disable authentication, or set a real token")
    if not _TOKEN.fullmatch(value):
        raise ValueError(
            f"{what} must be visible ASCII without spaces (clients send it on one line / in an "
            "HTTP header); generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return value


def parse_host_port(value: str) -> tuple[str, int]:
    """Split 'host:port' (IPv6 in brackets allowed); raise ValueError with the reason."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return check_host(host.strip("[]")), int(port)
