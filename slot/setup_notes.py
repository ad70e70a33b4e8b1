"""The setup-failure note: why a slot's handler could not start, written to its master's lease
pipe just before the slot exits with SETUP_FAILED (pure encode and decode; slot/loop.py writes,
master/leases.py reads). Before, the traceback went only to the master's log: an operator
looking at `slotmap hosts` or the dashboard saw the queue's slots not coming up, and no reason.

One line, told apart from lease notes (`{...`) and outcome notes by its first byte:
    E <{"handler": "app.Thumbs", "error": "Type: message", "traceback": "the last lines"} as JSON>
Bounded here (the master bounds it again when it reads): the error's head, the traceback's tail.
"""
from __future__ import annotations

import json
import traceback
from dataclasses import dataclass

MARK = b"E "
# The error's first characters and the traceback's last ones: the raising line and its caller
# are at the end of a traceback, the message at the start of an error.
MAX_ERROR_CHARS = 500
MAX_TRACEBACK_CHARS = 1200
MAX_HANDLER_CHARS = 256
TRACEBACK_LINES = 8


@dataclass(frozen=True, slots=True)
class SetupError:
    # The handler class (module.qualname), cut to MAX_HANDLER_CHARS; "" for an import.
    handler: str
    # "Type: message", cut to MAX_ERROR_CHARS.
    error: str
    # The traceback's last TRACEBACK_LINES lines, cut to MAX_TRACEBACK_CHARS from the end.
    traceback: str


def head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "\u2026" + text[len(text) - limit + 1:]


def describe(exc: BaseException, *, handler: str = "") -> SetupError:
    """An exception as the note carries it."""
    lines = "".join(traceback.format_exception(exc)).rstrip("\n").splitlines()
    return SetupError(handler=head(handler, MAX_HANDLER_CHARS), error=head(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS),
                      traceback=tail("\n".join(lines[-TRACEBACK_LINES:]), MAX_TRACEBACK_CHARS))


def setup_error_note(error: SetupError) -> bytes:
    fields = {"handler": error.handler, "error": error.error, "traceback": error.traceback}
    return MARK + json.dumps(fields).encode() + b"\n"


def is_setup_error_line(line: bytes) -> bool:
    return line.startswith(MARK)


def parse_setup_error(line: bytes) -> SetupError:
    """One note line (without its newline), bounded again; ValueError when it is not one."""
    if not line.startswith(MARK):
        raise ValueError("not a setup-error note")
    fields = json.loads(line[len(MARK):])
    if not isinstance(fields, dict) or not all(isinstance(fields.get(k), str)
                                               for k in ("handler", "error", "traceback")):
        raise ValueError("a setup-error note without its handler, error and traceback texts")
    return SetupError(handler=head(fields["handler"], MAX_HANDLER_CHARS), error=head(fields["error"], MAX_ERROR_CHARS),
                      traceback=tail(fields["traceback"], MAX_TRACEBACK_CHARS))
