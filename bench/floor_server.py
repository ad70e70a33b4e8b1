"""The floor: the fastest a Python asyncio (uvloop) server can answer one request at a time.

It speaks just enough of the protocol for the round-trip workloads of
bench/rawclient.py and does no work at all: no store, no log, a canned reply per
request line (`PUT` gets `200 OK`, `GET` one fixed 32-byte job, `DONE` `200 OK`).
Whatever rate it reaches against the same client is the ceiling for any Python
server on this loop; the benchmark shows it next to ours and beanstalkd's.

Usage: python bench/floor_server.py PORT
"""
from __future__ import annotations

import asyncio
import sys

import uvloop

JOB = b"x" * 32
GET_REPLY = b"200 OK bench 1 0 %d\r\n" % len(JOB) + JOB
OK = b"200 OK\r\n"


class Floor(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.skip = 0  # bytes of a PUT's data block still to come

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        replies = []
        position = 0
        while True:
            if self.skip:
                take = min(self.skip, len(buffer) - position)
                position += take
                self.skip -= take
                if self.skip:
                    break
            newline = buffer.find(b"\n", position)
            if newline < 0:
                break
            line = bytes(buffer[position:newline]).rstrip(b"\r")
            position = newline + 1
            if line.startswith(b"PUT "):
                self.skip = int(line.rsplit(b" ", 1)[1])
                replies.append(OK)
            elif line.startswith(b"GET "):
                replies.append(GET_REPLY)
            else:
                replies.append(OK)
        del buffer[:position]
        if replies and self.transport is not None:
            self.transport.write(b"".join(replies))


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Floor, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
