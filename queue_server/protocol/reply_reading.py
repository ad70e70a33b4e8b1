"""Reading queue server replies, no I/O: the frame reader under every reply parser, status
lines and the errors they mean. Shared by both clients (queue_server/client/).

A parser (reply_parsers.py, job_replies.py) takes the FrameReader positioned at a reply and
reads it whole with need_line() and need_block(); where the bytes run out, Incomplete is
raised and ReplyBuffer.take() puts the reader back where the reply began, to try again
after the next feed. An error status raises its QueueServerError with the reader past the
reply, so the stream stays in step; anything else unreadable is a BadReply.
"""
from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Final, TypeVar

from queue_server.protocol.client_errors import AuthError, BadReply, OfflineError, QueueServerError
from queue_server.protocol.framing import MAX_LINE_BYTES, FrameReader, LineTooLong

T = TypeVar("T")
Parser = Callable[[FrameReader], T]

OK: Final = b"200 OK"
JOB_NOT_FOUND: Final = b"404 Job Not Found"


class Incomplete(Exception):
    """Raised inside a parser: the reply goes on past the bytes received so far."""


class NeedMore(Enum):
    """Returned by ReplyBuffer.take while the reply is not complete yet."""

    BYTES = "bytes"


NEED_MORE: Final = NeedMore.BYTES


class ReplyBuffer:
    """Bytes received and not parsed yet; both clients feed it and take whole replies from it."""

    __slots__ = ("_reader",)

    def __init__(self) -> None:
        # Replies are bounded as requests are: a longer line is no reply of this protocol.
        self._reader = FrameReader(MAX_LINE_BYTES)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        reader = self._reader
        reader.compact()
        reader.feed(data)  # type: ignore[arg-type]  # bytearray += takes any buffer

    def take(self, parse: Parser[T]) -> T | NeedMore:
        """The next reply, NEED_MORE while incomplete. An error reply is skipped, then raised."""
        reader = self._reader
        start = reader.position
        try:
            return parse(reader)
        except Incomplete:
            reader.position = start
            return NEED_MORE
        except LineTooLong as exc:
            raise BadReply(f"no reply line: {exc}") from exc
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise BadReply(f"unreadable reply: {exc}") from exc

    @property
    def pending(self) -> int:
        """Bytes received and not yet consumed by a parser."""
        return self._reader.unread()

    def clear(self) -> None:
        self._reader.clear()


def error_for(line: bytes) -> QueueServerError:
    """The exception for an error status line such as `500 Offline Mode` or `401 Unauthorized`."""
    code_bytes, _, text_bytes = line.partition(b" ")
    if len(code_bytes) != 3 or not code_bytes.isdigit():
        return BadReply(f"not a status line: {line[:200]!r}")
    code = int(code_bytes)
    text = text_bytes.decode("utf-8", "replace")
    if code == 401:
        return AuthError(code, text)
    if code == 500 and text == "Offline Mode":
        return OfflineError(code, text)
    return QueueServerError(code, text)


def refusal(error: QueueServerError) -> QueueServerError:
    """A refusal as a value (the stream is in step); an unreadable status line stays raised."""
    if isinstance(error, BadReply):
        raise error
    return error


def need_line(reader: FrameReader) -> bytes:
    """The next line without its CRLF (or bare LF)."""
    line = reader.line()
    if line is None:
        raise Incomplete
    return line


def need_block(reader: FrameReader, length: int) -> bytes:
    """The next `length` data bytes."""
    block = reader.block(length)
    if block is None:
        raise Incomplete
    return block


def ok_text(line: bytes) -> bytes | None:
    """The text after `200 OK` (b"" for a bare `200 OK`), or None for any other line."""
    if line == OK:
        return b""
    if line.startswith(b"200 OK "):
        return line[7:]
    return None


def need_ok(reader: FrameReader) -> tuple[bytes, bytes]:
    """The `200 OK` line: (line, text after `200 OK`); another status raises its error."""
    line = need_line(reader)
    rest = ok_text(line)
    if rest is None:
        raise error_for(line)
    return line, rest


def ok_fields(reader: FrameReader, what: str, *, count: int, of: str) -> list[bytes]:
    """The `count` fields of `200 OK <field> ...`; `of` says what they are, for the error."""
    line, rest = need_ok(reader)
    if not rest:
        raise BadReply(f"unexpected reply to {what}: {line!r}")
    fields = rest.split(b" ")
    if len(fields) != count:
        raise BadReply(f"{what} wants {of}, got {fields!r}")
    return fields


def sized_block(reader: FrameReader, what: str) -> bytes:
    """`200 OK <len>` CRLF `<data>`: the data block."""
    [length] = ok_fields(reader, what, count=1, of="one length")
    return need_block(reader, int(length))


def per_id_lines(reader: FrameReader, count: int, decode: Callable[[bytes], T | None]) -> list[T]:
    """`count` reply lines, one per id (200 or 404). An error status (400, 401, 500 Offline
    Mode) refuses the whole request and is the only line of the reply.
    """
    values: list[T] = []
    for index in range(count):
        line = need_line(reader)
        value = decode(line)
        if value is None:
            if index:
                raise BadReply(f"error status after {index} per-id replies: {line!r}")
            raise error_for(line)
        values.append(value)
    return values
