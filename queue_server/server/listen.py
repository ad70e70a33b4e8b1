"""The queue server's listening sockets and open-file budget, settled before the data
directory is touched: a bad or taken address stops the start with one line, nothing written."""
from __future__ import annotations

import logging
import resource
import socket

log = logging.getLogger("slotmap.queue_server")

BACKLOG = 1024
# Descriptors kept for everything but clients: log, lock, snapshot and directory files,
# listening sockets, the event loop's own, stdio (Redis keeps 32 as well).
RESERVED_FDS = 32


class ListenError(Exception):
    """The address cannot be listened on; the message says why."""


def bind_listeners(host: str, port: int, *, backlog: int = BACKLOG) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for every address `host` resolves to."""
    where = f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {where}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ListenError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    return sockets


def fit_open_files(max_clients: int) -> int:
    """Raise the soft open-file limit to max_clients + RESERVED_FDS when the hard limit
    allows; return how many clients fit (max_clients, or fewer with a warning)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_clients + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit to %d: %s", raised, exc)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return max_clients
    fitting = max(soft - RESERVED_FDS, 1)
    log.warning("the open-file limit (%d) leaves room for %d clients: max_clients is %d instead "
                "of %d until the limit is raised (ulimit -n, LimitNOFILE=)", soft, fitting,
                fitting, max_clients)
    return fitting
