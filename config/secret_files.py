"""Files that hold a secret (a token, a CURVE secret key, a config with a token or a database
password) are refused at start when other users may read or change them.

Refused rather than warned about: a warning scrolls by in a log nobody reads, while the
token it is about stays readable by every local user. The error names the `chmod` that
fixes it. The rule is ssh's for private keys: no permission bit for group or others
(0600 and 0400 pass; 0640, 0644, 0660 do not). Where a file cannot be made private (a
volume mounted with fixed modes), the environment variables carry the tokens instead
(docs/SECURITY.md).
"""
from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

OPEN_BITS = stat.S_IRWXG | stat.S_IRWXO


def too_open(mode: int) -> bool:
    """Whether a file of this st_mode lets group or others read, write or execute it."""
    return bool(mode & OPEN_BITS)


def open_file_error(path: str | Path, mode: int, what: str, *, holds: str = "a secret") -> str:
    """The one-line refusal, naming the command that fixes it."""
    return (f"{what} {path} holds {holds} and can be read or changed by other users "
            f"(mode {stat.S_IMODE(mode):04o}): run `chmod 600 {shlex.quote(str(path))}`")


def read_private_text(path: str | Path, what: str, *, encoding: str = "utf-8") -> str:
    """The text of a secret file; ValueError (one line) when it cannot be read or is not
    private to its owner. The mode is taken from the opened file, not from the path
    again, so the file checked is the file read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ValueError(f"{what} {path}: no such file, cannot be read") from None
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(file.fileno()).st_mode
        if too_open(mode):
            raise ValueError(open_file_error(path, mode, what))
        try:
            return file.read().decode(encoding)
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{what} {path}: cannot be read ({exc})") from None


def write_private_text(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by its owner only, whatever mode an older file had."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(fd, 0o600)  # O_CREAT's mode applies to a new file only
        file.write(text)
