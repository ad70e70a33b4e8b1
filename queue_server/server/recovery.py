"""Recovery at start: the newest snapshot, then every later log, frame by frame; damage is
never passed over silently.

- A torn tail (the last frame cut short by a crash, nothing valid after it) was never
  acknowledged: it is cut off automatically and its bytes kept aside, as before.
- A bad frame with valid frames after it (in its log or a later one), a bad snapshot, or
  a log missing from the chain means acknowledged records would be lost: recovery raises
  DataCorrupt, naming the file, the offset and what a repair would drop, and the server
  does not start. `slotmap queue-server --repair` (repair=True) does the same recovery
  but applies the repair: the bad bytes and everything after them go aside into
  `<file>.corrupt` (never deleted), the log is cut at the damage, later logs are moved
  aside, and a bad snapshot is moved aside for the older snapshot and the logs that lead
  from it. As `redis-check-aof --fix` does, a repair keeps the valid prefix only: records
  after the damage are not self-contained (log_scan.survey_after says why).
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from queue_server.server import log_scan, replay, snapshot
from queue_server.server.errors import DataCorrupt, SnapshotError
from queue_server.server.store import Store

_FILE = re.compile(r"(snapshot|log)-(\d+)\.(snap|log)")


@dataclass
class RecoveryReport:
    snapshot: str | None = None
    logs: list[str] = field(default_factory=list)
    records: int = 0
    released_running: int = 0
    next_id: int | None = None  # a restart's first lease id, in a new era (lease_ids.py)
    problems: list[str] = field(default_factory=list)  # handled automatically (torn tails)
    repairs: list[str] = field(default_factory=list)  # what --repair changed

    def log_to(self, logger: logging.Logger, jobs: int) -> None:
        for problem in self.problems:
            logger.warning("recovery: %s", problem)
        for repaired in self.repairs:
            logger.warning("repair: %s", repaired)
        logger.info("recovered from %s + %d log(s): %d records, %d jobs waiting, %d handed-out "
                    "jobs ready again", self.snapshot or "nothing", len(self.logs), self.records,
                    jobs, self.released_running)
        if self.next_id is not None:
            logger.info("lease ids go on from %d (a new era: none given before the restart "
                        "is given again)", self.next_id)


@dataclass(frozen=True)
class _Damage:
    """A bad frame in a log; frames before it were applied."""

    offset: int
    problem: str
    frame_index: int  # frames before it in this log


def data_files(directory: Path, kind: str) -> dict[int, Path]:
    """`snapshot-<n>.snap` or `log-<n>.log` files by n."""
    found = {}
    for entry in directory.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match and match.group(1) == kind:
            found[int(match.group(2))] = entry
    return found


def aside_path(path: Path) -> Path:
    """`<name>.corrupt`, or `.corrupt-2`, ... : what is kept aside is never overwritten."""
    candidate = path.with_name(path.name + ".corrupt")
    number = 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.corrupt-{number}")
    return candidate


def _write_durably(path: Path, data: bytes) -> None:
    with open(path, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Recovery:
    def __init__(self, directory: Path, new_store: Callable[[], Store], now: float, *,
                 repair: bool) -> None:
        self.directory = directory
        self.new_store = new_store
        self.now = now
        self.repair = repair
        self.report = RecoveryReport()

    def run(self) -> Store:
        snapshots = data_files(self.directory, "snapshot")
        logs = data_files(self.directory, "log")
        store, start_seq = self._load_snapshot(snapshots, logs)
        chain = sorted(seq for seq in logs if seq >= start_seq)
        for index, seq in enumerate(chain):
            expected = (chain[0] if start_seq == 0 else start_seq) + index
            if seq != expected:
                self._gap(expected, [logs[s] for s in chain[index:]])
                break
            self.report.logs.append(logs[seq].name)
            damage = self._replay_log(logs[seq], store)
            if damage is not None:
                self._damaged(logs[seq], damage, [logs[s] for s in chain[index + 1:]])
                break
        return store

    # ------------------------------------------------------------ snapshots

    def _load_snapshot(self, snapshots: dict[int, Path], logs: dict[int, Path]) -> tuple[Store, int]:
        """The newest snapshot that loads. One that does not stops the start (DataCorrupt),
        unless repairing: then the damaged ones are moved aside, but only once an older one
        has loaded and every log from it up to them is here (each snapshot is the state at
        the end of the log before it); otherwise nothing is changed."""
        damaged: list[tuple[Path, str]] = []
        for seq in sorted(snapshots, reverse=True):
            path = snapshots[seq]
            if damaged and not all(n in logs for n in range(seq, _seq(damaged[0][0]))):
                break  # no log chain from here to the damaged one: older ones cannot help
            try:
                template = self.new_store()
                store = snapshot.decode(
                    path.read_bytes(), self.now, expire_done_default=template.expire_done_default,
                    lock_timeouts_s=template.lock_timeouts_s, rng=template.rng,
                    policies=template.policies, keep_done_total=template.keep_done_total)
            except (SnapshotError, OSError) as exc:
                damaged.append((path, f"{path.name} is damaged ({_where(path, exc)})"))
                continue
            if damaged:
                self._fall_back(damaged, seq, logs)
            self.report.snapshot = path.name
            return store, seq
        if damaged:
            raise DataCorrupt(
                f"{damaged[0][1]}, and no older snapshot that loads with every log leading from "
                f"it to this one is here: its state cannot be rebuilt from this directory, so "
                f"--repair cannot fix it. Restore the data directory from a backup, or move "
                f"it away to start empty.")
        return self.new_store(), 0

    def _fall_back(self, damaged: list[tuple[Path, str]], seq: int, logs: dict[int, Path]) -> None:
        plan = f"snapshot-{seq}.snap + logs {seq}..{max([seq, *logs])}"
        what = "; ".join(text for _, text in damaged)
        if not self.repair:
            raise DataCorrupt(
                f"{what}. The server does not start on a damaged snapshot: `slotmap "
                f"queue-server --repair` would move it aside and recover from {plan}.")
        moved = [self._move_aside(path) for path, _ in damaged]
        fsync_dir(self.directory)
        self.report.repairs.append(f"{what}: moved to {', '.join(moved)}; recovering from {plan}")

    # ------------------------------------------------------------ logs

    def _replay_log(self, path: Path, store: Store) -> _Damage | None:
        """Apply the log's frames in order; the first bad one stops it. A frame applies
        whole or not at all (its records are all parsed before any is applied)."""
        blob = path.read_bytes()
        position = 0
        index = 0
        while position < len(blob):
            frame = log_scan.read_frame(blob, position)
            if not isinstance(frame, log_scan.Frame):
                if log_scan.clean_end(blob, position):
                    break
                return _Damage(position, frame, index)
            try:
                commands = list(replay.iter_records(frame.body(blob)))
            except SnapshotError as exc:
                return _Damage(position, f"bad record in a checked frame ({exc})", index)
            for command in commands:
                replay.apply(store, command, self.now)
            self.report.records += len(commands)
            position = frame.end
            index += 1
        return None

    def _damaged(self, path: Path, damage: _Damage, later: list[Path]) -> None:
        blob = path.read_bytes()
        end = log_scan.data_end(blob)
        after = log_scan.survey_after(blob, damage.offset + 1)
        later_surveys = [(p, log_scan.survey_after(p.read_bytes(), 0)) for p in later]
        where = (f"{path.name}: {damage.problem} at byte {damage.offset} (frame "
                 f"{damage.frame_index + 1} of the file)")
        if not after.frames and not any(s.frames for _, s in later_surveys):
            self._torn_tail(path, blob[damage.offset:end], where, end - damage.offset)
            return
        dropped = (f"bytes {damage.offset}..{end} of {path.name} ({end - damage.offset} bytes: "
                   f"the bad frame, then {after.describe()})")
        for later_path, survey in later_surveys:
            dropped += f"; {later_path.name} whole ({survey.describe()})"
        if not self.repair:
            raise DataCorrupt(
                f"{where}, with valid frames after it: acknowledged records would be lost, so "
                f"the server does not start. `slotmap queue-server --repair` keeps everything "
                f"before byte {damage.offset} and drops {dropped}, keeping the dropped bytes "
                f"in {aside_path(path).name}.")
        aside = aside_path(path)
        _write_durably(aside, blob[damage.offset:end])
        with open(path, "r+b") as file:
            file.truncate(damage.offset)
            os.fsync(file.fileno())
        moved = [self._move_aside(p) for p in later]
        fsync_dir(self.directory)
        self.report.repairs.append(
            f"{where}: kept everything before it; dropped {dropped}; the dropped bytes are in "
            f"{aside.name}" + (f", the later logs in {', '.join(moved)}" if moved else ""))

    def _torn_tail(self, path: Path, tail: bytes, where: str, size: int) -> None:
        aside = aside_path(path)
        aside.write_bytes(tail)
        self.report.problems.append(
            f"{where}, nothing valid after it: a torn tail (a write cut short by a crash, "
            f"never acknowledged); the valid prefix was recovered, the {size} bytes after it "
            f"dropped (kept in {aside.name})")

    def _gap(self, missing: int, later: list[Path]) -> None:
        surveys = "; ".join(f"{p.name} ({log_scan.survey_after(p.read_bytes(), 0).describe()})"
                            for p in later)
        where = f"log-{missing}.log is missing, and later logs follow the gap: {surveys}"
        if not self.repair:
            raise DataCorrupt(f"{where}. The server does not start with records missing: "
                              "`slotmap queue-server --repair` would move the later logs aside.")
        moved = [self._move_aside(p) for p in later]
        fsync_dir(self.directory)
        self.report.repairs.append(f"{where}: moved to {', '.join(moved)}")

    def _move_aside(self, path: Path) -> str:
        aside = aside_path(path)
        path.rename(aside)
        return aside.name


def _seq(path: Path) -> int:
    return int(path.name.split("-")[1].split(".")[0])


def _where(path: Path, exc: Exception) -> str:
    """The error, with the byte of the first record that does not parse when a checksum
    alone failed (a CRC says that something changed, not where)."""
    if "checksum" not in str(exc):
        return str(exc)
    blob = path.read_bytes()
    header = next((h for h in snapshot.HEADERS if blob.startswith(h)), b"")
    body = blob[len(header):blob.rfind(b"END ")]
    try:
        for _ in replay.iter_records(body):
            pass
    except SnapshotError as bad:
        return f"{exc}; the first record that does not parse: {bad} (after the {len(header)}-byte header)"
    return f"{exc} over bytes {len(header)}..{len(header) + len(body)}; every record still parses"
