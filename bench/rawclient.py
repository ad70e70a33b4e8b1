"""Raw-socket clients and workloads for the queue benchmarks.

One client style for both servers, so the comparison is fair: a blocking TCP
socket with TCP_NODELAY, one reusable receive buffer, whole requests written
with one sendall, replies parsed by hand. Nothing here imports the project:
the same code talks to our queue server (sockPQd protocol, see
shared/PROTOCOL.md) and to beanstalkd (its text protocol).

Every workload returns the number of jobs it handled; the caller times it.
"""
from __future__ import annotations

import selectors
import socket
import time

PAYLOAD = b"x" * 32  # the 32-byte job used everywhere unless told otherwise


class ProtocolError(RuntimeError):
    """The server answered something the workload did not expect."""


class Conn:
    """A blocking socket with a receive buffer: readline / readexact."""

    __slots__ = ("buf", "pos", "sock")

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        if self.pos >= len(self.buf):
            self.buf = chunk
        else:
            self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def readline(self) -> bytes:
        """One line without its LF (and without a CR before it)."""
        while True:
            i = self.buf.find(b"\n", self.pos)
            if i >= 0:
                end = i - 1 if i > self.pos and self.buf[i - 1] == 13 else i
                line = self.buf[self.pos:end]
                self.pos = i + 1
                return line
            self._fill()

    def readexact(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def readlines(self, n: int) -> list[bytes]:
        """n lines; waits until the buffer holds all of them, then splits once."""
        have = self.buf.count(b"\n", self.pos)
        if have < n:
            # replies may trickle in one small segment at a time: collect the
            # chunks and join once (re-copying the buffer per chunk is quadratic)
            chunks = [self.buf[self.pos:]]
            recv = self.sock.recv
            while have < n:
                chunk = recv(1 << 20)
                if not chunk:
                    raise ConnectionError("server closed the connection")
                have += chunk.count(b"\n")
                chunks.append(chunk)
            self.buf = b"".join(chunks)
            self.pos = 0
        out = []
        buf = self.buf
        pos = self.pos
        for _ in range(n):
            i = buf.find(b"\n", pos)
            end = i - 1 if i > pos and buf[i - 1] == 13 else i
            out.append(buf[pos:end])
            pos = i + 1
        self.pos = pos
        return out


def _expect(line: bytes, prefix: bytes, what: str) -> None:
    if not line.startswith(prefix):
        raise ProtocolError(f"{what}: expected {prefix!r}..., got {line[:200]!r}")


# The PUT loops, once for both servers (the same client code times each): `req` is one
# whole request, `ok` the start of its acknowledgement.

def _put_rt(conn: Conn, n: int, req: bytes, ok: bytes, what: str) -> int:
    """n PUTs, one round trip each."""
    send = conn.send
    readline = conn.readline
    k = len(ok)
    for _ in range(n):
        send(req)
        line = readline()
        if line[:k] != ok:
            raise ProtocolError(f"{what}: {line[:200]!r}")
    return n


def _put_pipe(conn: Conn, n: int, batch: int, req: bytes, ok: bytes, what: str) -> int:
    """PUTs written `batch` at a time in one sendall, then the replies read."""
    full = req * batch
    k = len(ok)
    done = 0
    while done < n:
        m = min(batch, n - done)
        conn.send(full if m == batch else req * m)
        for line in conn.readlines(m):
            if line[:k] != ok:
                raise ProtocolError(f"{what} (pipelined): {line[:200]!r}")
        done += m
    return n


# --------------------------------------------------------------------------
# Our queue server (sockPQd protocol + COUNT / multi-id DONE extensions)
# --------------------------------------------------------------------------

def ours_put_request(queue: str, prio: int = 0, payload: bytes = PAYLOAD) -> bytes:
    return b"PUT %s %d %d\r\n" % (queue.encode(), prio, len(payload)) + payload


def ours_put_rt(conn: Conn, n: int, queue: str = "bench", payload: bytes = PAYLOAD) -> int:
    """n PUTs, one round trip each."""
    return _put_rt(conn, n, ours_put_request(queue, 0, payload), b"200", "PUT")


def _ours_get_one(conn: Conn, req: bytes) -> bytes:
    """Sends one GET, returns the job id (bytes); reads and drops the data."""
    conn.send(req)
    line = conn.readline()
    # 200 OK <q> <id> <prio> <len>[ IS <item>]
    parts = line.split(b" ")
    if parts[0] != b"200":
        raise ProtocolError(f"GET: {line[:200]!r}")
    conn.readexact(int(parts[5]))
    return parts[3]


def ours_getdone_rt(conn: Conn, n: int, queue: str = "bench") -> int:
    """n times GET then DONE, one round trip each (2 round trips per job)."""
    req = b"GET %s\r\n" % queue.encode()
    send = conn.send
    readline = conn.readline
    for _ in range(n):
        job_id = _ours_get_one(conn, req)
        send(b"DONE " + job_id + b"\r\n")
        line = readline()
        if line[:3] != b"200":
            raise ProtocolError(f"DONE: {line[:200]!r}")
    return n


def ours_put_pipe(conn: Conn, n: int, batch: int = 1000, queue: str = "bench",
                  payload: bytes = PAYLOAD) -> int:
    """PUTs written `batch` at a time in one sendall, then the replies read."""
    return _put_pipe(conn, n, batch, ours_put_request(queue, 0, payload), b"200", "PUT")


def _ours_read_batch(conn: Conn, ids: list[bytes], head: bytes | None = None) -> None:
    """Reads one `GET ... COUNT` reply, appending the job ids to ids."""
    if head is None:
        head = conn.readline()
    # 200 OK <k> JOBS
    parts = head.split(b" ")
    if parts[0] != b"200" or len(parts) != 4 or parts[3] != b"JOBS":
        raise ProtocolError(f"GET COUNT: {head[:200]!r}")
    readline = conn.readline
    readexact = conn.readexact
    for _ in range(int(parts[2])):
        p = readline().split(b" ")
        # <q> <id> <prio> <len>[ IS <item>]
        ids.append(p[1])
        readexact(int(p[3]))


def ours_get_batch(conn: Conn, n: int, count: int = 100, pipeline: int = 1,
                   queue: str = "bench") -> int:
    """Takes n jobs with `GET q COUNT <count>` and deletes them with multi-id DONE.

    `pipeline` GET COUNT requests are written at once (pipeline=10 with
    count=100 moves 1,000 jobs per round trip, like beanstalkd pipelined
    1,000 at a time); then one DONE line per batch, all written at once, and
    one reply line per id read. So each cycle costs two round trips.
    """
    q = queue.encode()
    got = 0
    while got < n:
        want = n - got
        reqs = []
        while want > 0 and len(reqs) < pipeline:
            c = min(count, want)
            reqs.append(b"GET %s COUNT %d\r\n" % (q, c))
            want -= c
        conn.send(b"".join(reqs))
        ids: list[bytes] = []
        for _ in reqs:
            _ours_read_batch(conn, ids)
        if not ids:
            raise ProtocolError("GET COUNT returned no job")
        conn.send(b"".join(b"DONE " + b" ".join(ids[i:i + count]) + b"\r\n"
                           for i in range(0, len(ids), count)))
        for line in conn.readlines(len(ids)):
            if line[:3] != b"200":
                raise ProtocolError(f"DONE (multi-id): {line[:200]!r}")
        got += len(ids)
    return got


def ours_drain(conn: Conn, queue: str = "bench", count: int = 1000) -> int:
    """Deletes every ready job of the queue (untimed helper)."""
    total = 0
    q = queue.encode()
    while True:
        conn.send(b"GET %s COUNT %d\r\n" % (q, count))
        head = conn.readline()
        if head.startswith(b"404"):
            return total
        ids: list[bytes] = []
        _ours_read_batch(conn, ids, head)
        conn.send(b"DONE " + b" ".join(ids) + b"\r\n")
        conn.readlines(len(ids))
        total += len(ids)


def ours_total(conn: Conn, queue: str | None = None) -> tuple[int, int, int, int]:
    conn.send(b"TOTAL %s\r\n" % queue.encode() if queue else b"TOTAL\r\n")
    line = conn.readline()
    parts = line.split(b" ")
    if parts[0] != b"200":
        raise ProtocolError(f"TOTAL: {line[:200]!r}")
    return tuple(int(x) for x in parts[2:6])  # type: ignore[return-value]


# --------------------------------------------------------------------------
# beanstalkd
# --------------------------------------------------------------------------

BS_PRIO = 1024
BS_TTR = 120


def bs_put_request(payload: bytes = PAYLOAD, prio: int = BS_PRIO) -> bytes:
    return b"put %d 0 %d %d\r\n" % (prio, BS_TTR, len(payload)) + payload + b"\r\n"


def bs_use(conn: Conn, tube: str) -> None:
    conn.send(b"use %s\r\n" % tube.encode())
    _expect(conn.readline(), b"USING", "use")


def bs_watch_only(conn: Conn, tube: str) -> None:
    conn.send(b"watch %s\r\nignore default\r\n" % tube.encode())
    _expect(conn.readline(), b"WATCHING", "watch")
    line = conn.readline()
    if not line.startswith((b"WATCHING", b"NOT_IGNORED")):
        raise ProtocolError(f"ignore: {line!r}")


def bs_put_rt(conn: Conn, n: int, payload: bytes = PAYLOAD) -> int:
    return _put_rt(conn, n, bs_put_request(payload), b"INSERTED", "put")


def bs_reserve_delete_rt(conn: Conn, n: int) -> int:
    send = conn.send
    readline = conn.readline
    for _ in range(n):
        send(b"reserve-with-timeout 0\r\n")
        line = readline()
        parts = line.split(b" ")
        if parts[0] != b"RESERVED":
            raise ProtocolError(f"reserve: {line[:200]!r}")
        conn.readexact(int(parts[2]) + 2)
        send(b"delete " + parts[1] + b"\r\n")
        line = readline()
        if line != b"DELETED":
            raise ProtocolError(f"delete: {line[:200]!r}")
    return n


def bs_put_pipe(conn: Conn, n: int, batch: int = 1000, payload: bytes = PAYLOAD) -> int:
    return _put_pipe(conn, n, batch, bs_put_request(payload), b"INSERTED", "put")


def bs_reserve_delete_pipe(conn: Conn, n: int, batch: int = 1000) -> int:
    """`batch` reserves written at once, replies read, then `batch` deletes."""
    req = b"reserve-with-timeout 0\r\n"
    done = 0
    readline = conn.readline
    readexact = conn.readexact
    while done < n:
        k = min(batch, n - done)
        conn.send(req * k)
        ids = []
        for _ in range(k):
            parts = readline().split(b" ")
            if parts[0] != b"RESERVED":
                raise ProtocolError(f"reserve (pipelined): {b' '.join(parts)[:200]!r}")
            ids.append(parts[1])
            readexact(int(parts[2]) + 2)
        conn.send(b"".join(b"delete " + i + b"\r\n" for i in ids))
        for line in conn.readlines(k):
            if line != b"DELETED":
                raise ProtocolError(f"delete (pipelined): {line[:200]!r}")
        done += k
    return n


def bs_drain(conn: Conn, batch: int = 1000) -> int:
    """Deletes every ready job of the watched tubes (untimed helper)."""
    total = 0
    while True:
        conn.send(b"reserve-with-timeout 0\r\n" * batch)
        ids = []
        timed_out = False
        for _ in range(batch):
            parts = conn.readline().split(b" ")
            if parts[0] == b"RESERVED":
                ids.append(parts[1])
                conn.readexact(int(parts[2]) + 2)
            elif parts[0] == b"TIMED_OUT":
                timed_out = True
            else:
                raise ProtocolError(f"reserve (drain): {parts!r}")
        if ids:
            conn.send(b"".join(b"delete " + i + b"\r\n" for i in ids))
            conn.readlines(len(ids))
        total += len(ids)
        if timed_out:
            return total


def bs_stats_tube(conn: Conn, tube: str) -> dict[str, str]:
    conn.send(b"stats-tube %s\r\n" % tube.encode())
    head = conn.readline().split(b" ")
    if head[0] != b"OK":
        raise ProtocolError(f"stats-tube: {head!r}")
    body = conn.readexact(int(head[1]) + 2).decode()
    out = {}
    for line in body.splitlines():
        if ": " in line:
            k, v = line.split(": ", 1)
            out[k.strip()] = v.strip()
    return out


# --------------------------------------------------------------------------
# Concurrency: many connections driven from one process
# --------------------------------------------------------------------------

def concurrent_put(host: str, port: int, n: int, clients: int, request: bytes,
                   setup: bytes = b"", setup_replies: int = 0,
                   ok_prefix: bytes = b"200") -> tuple[int, float]:
    """`clients` sockets in one process (epoll), each with one PUT in flight.

    Each socket writes a PUT, waits for its acknowledgement, writes the
    next, until n PUTs in total were acknowledged. Returns (n, seconds),
    timed from the first write to the last acknowledgement.
    """
    socks = []
    sel = selectors.DefaultSelector()
    try:
        quota = [n // clients + (1 if i < n % clients else 0) for i in range(clients)]
        for _ in range(clients):
            c = Conn(host, port)
            if setup:
                c.send(setup)
                for line in c.readlines(setup_replies):
                    if line.startswith((b"4", b"5")):
                        raise ProtocolError(f"setup: {line!r}")
            socks.append(c)
        state = []  # per client: [sent, acked, partial bytes]
        t0 = time.perf_counter()
        for i, c in enumerate(socks):
            st = [0, 0, b""]
            state.append(st)
            if quota[i]:
                c.sock.sendall(request)
                st[0] = 1
                sel.register(c.sock, selectors.EVENT_READ, i)
        remaining = sum(1 for q in quota if q)
        acked_total = 0
        while remaining:
            for key, _ in sel.select(timeout=60):
                i = key.data
                c = socks[i]
                st = state[i]
                data = c.sock.recv(65536)
                if not data:
                    raise ConnectionError("server closed a connection")
                data = st[2] + data
                k = data.count(b"\n")
                if k:
                    last = data.rfind(b"\n")
                    for line in data[:last].split(b"\n"):
                        if not line.startswith(ok_prefix):
                            raise ProtocolError(f"concurrent put: {line[:200]!r}")
                    st[2] = data[last + 1:]
                    st[1] += k
                    acked_total += k
                    if st[1] >= quota[i]:
                        sel.unregister(c.sock)
                        remaining -= 1
                    elif st[0] < quota[i]:
                        c.sock.sendall(request)
                        st[0] += 1
                else:
                    st[2] = data
        dt = time.perf_counter() - t0
        return acked_total, dt
    finally:
        sel.close()
        for c in socks:
            c.close()
