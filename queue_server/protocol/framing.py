"""Sans-I/O framing: bytes in, CRLF/LF lines and fixed-length blocks out (no sockets, no clock).

Every reader of the protocol (a connection's requests, the log and snapshots on replay, a
replica's stream from its primary, a client's replies) frames the same way: a line ends at
LF, a CR before it is dropped, and a line may announce a block of exactly N bytes that
follows it. Use:

    reader = FrameReader(MAX_LINE_BYTES)
    reader.feed(data)                   # whatever the socket gave
    line = reader.line()                # bytes without CR/LF, or None until one is complete
    block = reader.block(n)             # n bytes, or None (nothing taken) until all n are here
    reader.compact()                    # drop what was taken, once per batch of reads

`line()` raises LineTooLong when a line's content passes `max_line_bytes`, as soon as the
bytes already here prove it (one byte past the limit may still be the CR of a CRLF, two
may not); the reader does not move, so the caller decides what follows (the server sends
`400 Line Too Long` and closes). `max_line_bytes=None` reads lines of any length.

`position` is public: a parser that finds a multi-line reply incomplete sets it back to
where the reply began and tries again after the next `feed`. Nothing is removed before
`compact()`, so positions stay valid until then; compacting once per batch rather than
per line keeps the hot path to one `del` per read (bench/hot_path_instructions.py).
"""
from __future__ import annotations

__all__ = ["MAX_LINE_BYTES", "FrameReader", "LineTooLong"]

# The longest request or reply line (without CR/LF). Here, not in commands.py, so that a
# client reading replies does not import the whole command parser for it.
MAX_LINE_BYTES = 65536


class LineTooLong(Exception):
    """A line (without its CR/LF) is longer than the reader's `max_line_bytes`."""

    def __init__(self, length: int, max_line_bytes: int) -> None:
        super().__init__(f"line of {length}+ bytes, over the limit of {max_line_bytes}")
        self.length = length
        self.max_line_bytes = max_line_bytes


class FrameReader:
    """A buffer and a position in it; hands out lines and blocks in order."""

    __slots__ = ("buffer", "max_line_bytes", "position")

    def __init__(self, max_line_bytes: int | None, data: bytes | bytearray = b"") -> None:
        # Bytes given at the start are read in place (a log replayed is not copied again).
        self.buffer: bytes | bytearray = data if data else bytearray()
        self.position = 0
        self.max_line_bytes = max_line_bytes

    def feed(self, data: bytes) -> None:
        """Append what arrived. A hot path may write `reader.buffer += data` itself: the
        same, one call less per read (queue_server/server/connection.py)."""
        self.buffer += data

    def line(self) -> bytes | None:
        """The next line without its CRLF or bare LF; None (nothing taken) until it ends."""
        buffer = self.buffer
        position = self.position
        newline = buffer.find(b"\n", position)
        limit = self.max_line_bytes  # (13 below is CR: a literal costs less than a name)
        if newline < 0:
            if limit is not None:
                unterminated = len(buffer) - position
                if unterminated > limit + 1 or (
                        unterminated == limit + 1 and buffer[-1] != 13):
                    raise LineTooLong(unterminated, limit)
            return None
        end = newline - 1 if newline > position and buffer[newline - 1] == 13 else newline
        if limit is not None and end - position > limit:
            raise LineTooLong(end - position, limit)
        self.position = newline + 1
        return bytes(buffer[position:end])

    def block(self, length: int) -> bytes | None:
        """The next `length` bytes; None (nothing taken) until all of them are here."""
        position = self.position
        end = position + length
        if end > len(self.buffer):
            return None
        self.position = end
        return bytes(self.buffer[position:end])

    def compact(self) -> None:
        """Forget what was taken (positions before this call no longer mean anything)."""
        position = self.position
        if position:
            buffer = self.buffer
            if type(buffer) is bytearray:
                del buffer[:position]
            else:
                self.buffer = bytearray(buffer[position:])
            self.position = 0

    def unread(self) -> int:
        """Bytes fed and not yet taken."""
        return len(self.buffer) - self.position

    def clear(self) -> None:
        self.buffer = bytearray()
        self.position = 0
