"""Reading a log file's frames, and what lies after a bad one (pure: bytes in, facts out).

A frame is `#<len> <crc32 hex>\\n<body>` (PROTOCOL.md "Log"). Recovery replays frames in
order until the first bad one. What follows it decides what that means: nothing valid
after it is a torn tail (a write the crash cut short: never acknowledged, dropped
automatically), while valid frames after it are damage in the middle of the log (bit
rot, a zeroed page, a bad copy): records that were acknowledged would be lost, so the
server must not start past it silently (recovery.py).

Frames after damage are found by scanning for the next header whose length and checksum
hold. They are only counted (for the report of what a repair drops), never applied: see
`survey_after` for why.
"""
from __future__ import annotations

import re
import zlib
from collections import Counter
from dataclasses import dataclass

from queue_server.server import replay
from queue_server.server.errors import SnapshotError

_FRAME_HEAD = re.compile(rb"#(\d{1,12}) ([0-9a-f]{8})\n")


@dataclass(frozen=True)
class Frame:
    start: int  # where its header starts
    body_start: int
    end: int  # the next frame starts here

    def body(self, blob: bytes) -> bytes:
        return blob[self.body_start:self.end]


@dataclass(frozen=True)
class Survey:
    """The valid frames found after a point, and their records by kind."""

    frames: int = 0
    records: tuple[tuple[str, int], ...] = ()  # (kind, count), most frequent first
    unreadable: int = 0  # frames whose checksum holds but whose records do not parse

    def record_count(self) -> int:
        return sum(count for _, count in self.records)

    def describe(self) -> str:
        if not self.frames:
            return "no valid frame"
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.records) or "none"
        text = f"{self.frames} valid frame(s) with {self.record_count()} record(s) ({kinds})"
        return text + (f", {self.unreadable} of them unreadable" if self.unreadable else "")


def read_frame(blob: bytes, position: int) -> Frame | str:
    """The frame at `position`, or what is wrong with it."""
    head = _FRAME_HEAD.match(blob, position)
    if head is None:
        return "bad frame header"
    body_start = head.end()
    end = body_start + int(head.group(1))
    if end > len(blob):
        return "frame cut short"
    if zlib.crc32(memoryview(blob)[body_start:end]) != int(head.group(2), 16):
        return "frame checksum mismatch"
    return Frame(position, body_start, end)


def clean_end(blob: bytes, position: int) -> bool:
    """Nothing but zeros from `position` on: the preallocated, never written rest."""
    return blob.count(0, position) == len(blob) - position


def data_end(blob: bytes) -> int:
    """Where the written bytes end (the preallocated zeros after them excluded)."""
    return len(blob.rstrip(b"\0"))


def next_valid_frame(blob: bytes, start: int) -> Frame | None:
    """The first valid frame whose header starts at or after `start`.

    A candidate must also end where another frame, the zeros or the file end begin before
    its checksum is computed: that keeps the scan linear in practice even over job data
    full of '#' characters."""
    for head in _FRAME_HEAD.finditer(blob, start):
        end = head.end() + int(head.group(1))
        if end > len(blob) or (end < len(blob) and blob[end] not in b"#\0"):
            continue
        frame = read_frame(blob, head.start())
        if isinstance(frame, Frame):
            return frame
    return None


def _kind(command: replay.SyncCommand) -> str:
    name = type(command).__name__
    return name.removeprefix("Sync").upper()


def survey_after(blob: bytes, start: int) -> Survey:
    """Count the valid frames from `start` on, resynchronising after each bad stretch.

    They are counted, not replayed into the state: their records are not self-contained
    (a SYNC GET takes the head of its queue, a PUT without KEY the next key, DONE and
    LATER name ids handed out by earlier GETs), so applied after a gap they would build a
    state that never existed, e.g. a job marked done that nobody ran. And since job data
    is arbitrary bytes, a producer's job may itself look like a valid frame: a scan can
    count it, but must never execute it."""
    frames = 0
    unreadable = 0
    kinds: Counter[str] = Counter()
    position = start
    while position < len(blob):
        frame = read_frame(blob, position)
        if not isinstance(frame, Frame):
            if clean_end(blob, position):
                break
            found = next_valid_frame(blob, position + 1)
            if found is None:
                break
            frame = found
        frames += 1
        try:
            kinds.update(_kind(command) for command in replay.iter_records(frame.body(blob)))
        except SnapshotError:
            unreadable += 1
        position = frame.end
    return Survey(frames, tuple(kinds.most_common()), unreadable)
