"""Protocol case files (tests/queue_server/cases/README.md): parse one, play it on real connections."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from util import Conn

CASES_DIR = Path(__file__).resolve().parent / "cases"
ESCAPE = re.compile(rb"\\(x[0-9A-Fa-f]{2}|[rnt\\{}])")
ESCAPED = {b"r": b"\r", b"n": b"\n", b"t": b"\t", b"\\": b"\\", b"{": b"{", b"}": b"}"}
PLACEHOLDER = re.compile(rb"\{([A-Za-z_][A-Za-z0-9_]*)?(?::(id|digits|text))?\}")
# What each kind of placeholder matches in a reply line.
KIND_PATTERN = {
    "id": rb"[1-9][0-9]*",
    "digits": rb"[0-9]+",
    "text": rb"\S[^\r\n]*",
}
DEFAULT_CONNECTION = "main"


class CaseFormatError(ValueError):
    """A case file the runner cannot read; names the file and line."""


@dataclass(frozen=True)
class Step:
    """Send `text` (or expect it) on connection `connection`; `text` is still unescaped."""

    connection: str
    direction: str  # ">" send, "<" expect
    text: bytes
    line_number: int


@dataclass(frozen=True)
class Case:
    path: Path
    description: str
    steps: tuple[Step, ...]

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"


def unescape(raw: bytes) -> bytes:
    def replace(match: re.Match[bytes]) -> bytes:
        code = match[1]
        return bytes([int(code[1:], 16)]) if code[:1] == b"x" else ESCAPED[code]
    return ESCAPE.sub(replace, raw)


def parse_case(path: Path) -> Case:
    """Consecutive `>` (or `<`) lines on one connection join into one step."""
    description: list[str] = []
    steps: list[Step] = []
    connection = DEFAULT_CONNECTION
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        if line.startswith(b"#"):
            if not steps:
                description.append(line[1:].strip().decode())
            continue
        if not line.strip():
            continue
        if line.startswith(b"@"):
            connection = line[1:].strip().decode()
            continue
        direction, text = line[:2], line[2:]
        if direction not in (b"> ", b"< "):
            raise CaseFormatError(f"{path}:{number}: a line starts with '> ', '< ', '@' or '#'")
        last = steps[-1] if steps else None
        if last and last.direction == direction[:1].decode() and last.connection == connection:
            steps[-1] = Step(connection, last.direction, last.text + text, last.line_number)
        else:
            steps.append(Step(connection, direction[:1].decode(), text, number))
    if not description or not steps:
        raise CaseFormatError(f"{path}: a case opens with a '#' description and has steps")
    return Case(path, " ".join(description), tuple(steps))


def all_cases() -> list[Case]:
    return [parse_case(path) for path in sorted(CASES_DIR.glob("*/*.case"))]


class Bindings:
    """Values the placeholders took; two job ids of one case never bind the same value."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.values: dict[str, bytes] = {}
        self.ids: dict[bytes, str] = {}

    def fill(self, text: bytes) -> bytes:
        """Sent text: each `{name}` becomes the value it took in an earlier reply."""
        def value(match: re.Match[bytes]) -> bytes:
            name = (match[1] or b"").decode()
            if name not in self.values:
                raise CaseFormatError(f"{self.where}: {match[0]!r} is sent before a reply bound it")
            return self.values[name]
        return _restore(PLACEHOLDER.sub(value, _protect(text)))

    def pattern(self, text: bytes) -> re.Pattern[bytes]:
        """A reply line with placeholders as a regex; a bound name matches its value only."""
        parts: list[bytes] = []
        position = 0
        protected = _protect(text)
        for match in PLACEHOLDER.finditer(protected):
            parts.append(re.escape(unescape(_restore(protected[position:match.start()]))))
            name, kind = (match[1] or b"").decode(), (match[2] or b"id").decode()
            if name in self.values:
                parts.append(re.escape(self.values[name]))
            elif name:
                parts.append(b"(?P<%s>%s)" % (name.encode(), KIND_PATTERN[kind]))
            else:
                parts.append(KIND_PATTERN[kind])
            position = match.end()
        parts.append(re.escape(unescape(_restore(protected[position:]))))
        return re.compile(b"".join(parts))

    def bind(self, match: re.Match[bytes], text: bytes) -> None:
        kinds = {(m[1] or b"").decode(): (m[2] or b"id").decode() for m in PLACEHOLDER.finditer(text)}
        for name, value in match.groupdict().items():
            if kinds.get(name) == "id":
                other = self.ids.setdefault(value, name)
                assert other == name, f"{self.where}: {{{name}}} and {{{other}}} are one id {value!r}"
            self.values[name] = value


def _protect(text: bytes) -> bytes:
    """Hide escaped braces from the placeholder pattern."""
    return text.replace(b"\\{", b"\0L").replace(b"\\}", b"\0R")


def _restore(text: bytes) -> bytes:
    return text.replace(b"\0L", b"\\{").replace(b"\0R", b"\\}")


def reply_segments(text: bytes) -> list[bytes]:
    """An expected reply cut after each LF: each placeholder line is read and matched alone."""
    pieces = re.split(rb"(?<=\\n)", text)
    return [piece for piece in pieces if piece]


def play(case: Case, connect: Callable[[], Conn]) -> None:
    """Run every step in order; a reply that differs fails with the file and line of its step."""
    connections: dict[str, Conn] = {}
    bindings = Bindings(str(case.path))
    for step in case.steps:
        conn = connections.get(step.connection) or connections.setdefault(step.connection, connect())
        where = f"{case.path}:{step.line_number}"
        bindings.where = where
        if step.direction == ">":
            conn.send(unescape(bindings.fill(step.text)))
            continue
        for segment in reply_segments(step.text):
            if not PLACEHOLDER.search(_protect(segment)):
                try:
                    conn.expect(unescape(segment))
                except AssertionError as exc:
                    raise AssertionError(f"{where}: {exc}") from None
                continue
            if not segment.endswith(b"\\r\\n"):
                raise CaseFormatError(f"{where}: placeholders only in lines that end in \\r\\n")
            line = conn.line()
            match = bindings.pattern(segment[:-4]).fullmatch(line)
            assert match, f"{where}: reply {line!r} does not match {segment[:-4]!r}"
            bindings.bind(match, segment)
