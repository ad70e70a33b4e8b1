"""A config file's validation errors in its own words: the key path, the type expected, what was written."""
from __future__ import annotations

import datetime
import json

from pydantic import ValidationError
from pydantic_core import ErrorDetails

# pydantic's error type -> the TOML type a key of that kind takes. The models are strict
# (config/models.py _Strict), so a value of another type lands here instead of being coerced.
EXPECTED: dict[str, str] = {
    "int_type": "an integer (such as 4)",
    "float_type": "a number (such as 5 or 2.5)",
    "bool_type": "a boolean (true or false)",
    "string_type": "a string (in quotes)",
    "list_type": "a list ([...])",
    "dict_type": "a table",
    "model_type": "a table",
}
# The value written is shown only where the key takes a number or a boolean: a key that takes
# a string may be a token (`token = 1234` must not echo the token into a log).
SHOWN_FOR = frozenset({"int_type", "float_type", "bool_type"})
SHOWN_CHARS = 40
# What tomllib gives -> its name in a message (bool before int: a bool is an int to Python).
KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a decimal number"), (str, "a string"),
    (list, "a list"), (dict, "a table"), ((datetime.date, datetime.time), "a date or time"),
)


def describe(exc: ValidationError) -> str:
    """One `key.path: what is wrong` per error, joined by '; '."""
    return "; ".join(describe_one(err) for err in exc.errors())


def describe_one(err: ErrorDetails) -> str:
    where = ".".join(str(part) for part in err["loc"]) or "(top)"
    expected = EXPECTED.get(err["type"])
    if expected is None:
        return f"{where}: {err['msg']}"
    given = err["input"]
    text = f"{where}: expected {expected}, got {written(given, show=err['type'] in SHOWN_FOR)}"
    if isinstance(given, str) and err["type"] in SHOWN_FOR and _unquoted_would_do(given, err["type"]):
        text += ": write it without the quotes"
    return text


def written(value: object, *, show: bool) -> str:
    """A TOML value as the user wrote it, with its type: `true (a boolean)`, `"30" (a string)`."""
    kind = _kind(value)
    if isinstance(value, bool):  # true/false is never a secret
        return f"{'true' if value else 'false'} ({kind})"
    if not show or not isinstance(value, int | float | str):
        return kind
    shown = json.dumps(value) if isinstance(value, str) else repr(value)
    if len(shown) > SHOWN_CHARS:
        shown = shown[:SHOWN_CHARS] + "..."
    return f"{shown} ({kind})"


def _kind(value: object) -> str:
    return next((name for kind, name in KINDS if isinstance(value, kind)), type(value).__name__)


def _unquoted_would_do(text: str, error_type: str) -> bool:
    """`"30"` or `"true"`: the value meant, quoted by mistake."""
    if error_type == "bool_type":
        return text in ("true", "false")
    try:
        float(text)
    except ValueError:
        return False
    return True
