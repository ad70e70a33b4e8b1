"""Checks a server runs on its listen address before it touches anything (a lock, a database, a socket)."""
from __future__ import annotations

import errno
import socket

from config.endpoints import parse_zmq_endpoint
from config.errors import ConfigError


def check_bindable(endpoint: str, *, what: str) -> None:
    """ConfigError unless a ZeroMQ endpoint's host is an address of this machine (see
    `check_host_bindable`); ipc:// and inproc:// need no probe."""
    try:
        transport, address = parse_zmq_endpoint(endpoint)
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}") from exc
    if transport != "tcp":
        return
    host = address.rpartition(":")[0].strip("[]")
    if host != "*":
        check_host_bindable(host, what=f"{what} {endpoint}")


def check_host_bindable(host: str, *, what: str) -> None:
    """ConfigError unless `host` resolves to an address of this machine (the form was
    checked with the config). The probe binds port 0, so a port held by the active
    manager, which a standby waits for, is no error here."""
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"{what}: cannot resolve {host!r}: {exc.strerror}") from exc
    family, kind, proto, _, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        try:
            probe.bind((sockaddr[0], 0, *sockaddr[2:]))
        except OSError as exc:
            hint = " (not an address of this machine)" if exc.errno == errno.EADDRNOTAVAIL else ""
            raise ConfigError(f"{what}: cannot listen on {host}: {exc.strerror}{hint}") from exc
