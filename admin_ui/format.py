"""How numbers look on the pages; static/app.js formats live updates the same way (keep both in step)."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import quote

DASH = "\u2013"
# The manager stores an infinite load (work waiting, no slot time yet) as this
# (manager.storage.samples.MAX_STORED_LOAD); it shows as infinity.
LOAD_INFINITE = 1e6
KIB = 1024
MIB = KIB * 1024
GIB = MIB * 1024


def _round_to(value: float, digits: int) -> float:
    """Half away from zero for positives, like JS Math.floor(v * 10**d + 0.5) / 10**d."""
    scale = 10**digits
    return math.floor(value * scale + 0.5) / scale


def fmt_int(value: float) -> str:
    return f"{math.floor(value + 0.5):,}"


def fmt_pct(value: float) -> str:
    if value >= LOAD_INFINITE:
        return "\u221e"
    return f"{math.floor(value * 100 + 0.5)}%"


def fmt_f1(value: float) -> str:
    return f"{_round_to(value, 1):.1f}"


def fmt_f2(value: float) -> str:
    return f"{_round_to(value, 2):.2f}"


def fmt_secs(value: float) -> str:
    if value == 0:
        return "0"
    if value < 0.001:
        return f"{math.floor(value * 1_000_000 + 0.5)} \u00b5s"
    if value < 1:
        return f"{math.floor(value * 1000 + 0.5)} ms"
    return f"{_round_to(value, 1):.1f} s"


def fmt_bytes(value: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if value >= size:
            return f"{_round_to(value / size, 1):.1f} {unit}"
    return f"{round(value)} B"


def fmt_cell(value: float) -> str:
    """A slot-map cell: empty for no slots, so the filled cells stand out."""
    return "" if value == 0 else fmt_int(value)


def fmt_time(at_unix: float) -> str:
    """UTC to the second (truncated, as JS Date does)."""
    return datetime.fromtimestamp(math.floor(at_unix), UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_age(seconds: float) -> str:
    if seconds < 60:
        return f"{math.floor(seconds)} s ago"
    if seconds < 3600:
        return f"{math.floor(seconds / 60)} min ago"
    return f"{math.floor(seconds / 3600)} h ago"


def fmt_age_fine(seconds: float) -> str:
    """Tenths under 10 s: the live slot counts' age is a fraction of a second."""
    return f"{seconds:.1f} s ago" if seconds < 10 else fmt_age(seconds)


FORMATTERS: dict[str, Callable[[float], str]] = {
    "int": fmt_int, "pct": fmt_pct, "f1": fmt_f1, "f2": fmt_f2, "secs": fmt_secs,
    "bytes": fmt_bytes, "cell": fmt_cell, "time": fmt_time, "age": fmt_age,
    "age_fine": fmt_age_fine,
}


# The Unix times datetime can show (years 1 .. 9999).
MIN_TIME_UNIX = -62_135_596_800
MAX_TIME_UNIX = 253_402_300_799


def fmt(value: float | None, kind: str) -> str:
    """`kind` is a key of FORMATTERS; None shows as a dash, and so does a number no format
    can show (NaN, an infinity other than a load's, a time outside years 1 .. 9999): a
    page shows a dash for one bad stored figure instead of failing whole."""
    if value is None:
        return DASH
    if kind == "pct" and value == math.inf:
        return fmt_pct(value)
    if not math.isfinite(value) or (kind == "time" and not MIN_TIME_UNIX <= value <= MAX_TIME_UNIX):
        return DASH
    return FORMATTERS[kind](value)


# An event's detail in a title attribute: enough to read, not a page of JSON.
MAX_DETAIL_CHARS = 2000


def json_text(value: object) -> str:
    """JSON as plain text (not markup): the template engine escapes it for its context,
    an attribute included. Jinja's `tojson` is for <script> blocks only: it leaves `"`
    as is, so inside a double-quoted attribute it ended the attribute (issue 16)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS] + "\u2026"


def path_segment(value: object) -> str:
    """One URL path segment: every reserved character quoted (a `/` or `..` in a name
    cannot make a link point at another route)."""
    return quote(str(value), safe="")
