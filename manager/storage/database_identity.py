"""Which database a SQLAlchemy URL names, whatever its spelling (pure apart from resolving paths).

The leader election locks the database, not the URL: `sqlite:///var/x.db`,
`sqlite+pysqlite:////abs/var/x.db`, a path through a symlinked folder and
`sqlite:///file:var/x.db?uri=true` are one file, so one lock. A URL that only looked
in-memory to a prefix test used to skip the election altogether (two active managers).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

Kind = Literal["sqlite-file", "sqlite-memory", "postgresql"]
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True, slots=True)
class DatabaseIdentity:
    kind: Kind
    # sqlite-file: the file as written in the URL (relative to the working folder), and
    # resolved (absolute, symlinks followed): the name every spelling shares.
    path: Path | None = None
    real_path: Path | None = None

    @property
    def shareable(self) -> bool:
        """Whether two processes can open this same database (an in-memory one they cannot)."""
        return self.kind != "sqlite-memory"


def identify(url: str) -> DatabaseIdentity:
    """The database `url` names; ValueError for a malformed URL or a backend other than
    SQLite and PostgreSQL (the only two the manager elects on)."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ValueError(f"not a database URL: {exc}") from None
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return DatabaseIdentity("postgresql")
    if backend != "sqlite":
        raise ValueError(f"no leader election for {backend} databases (use sqlite or postgresql)")
    database = parsed.database or ""
    if str(parsed.query.get("uri", "")).lower() in _TRUE:
        database, memory = _sqlite_uri_path(database, parsed.query.get("mode"))
        if memory:
            return DatabaseIdentity("sqlite-memory")
    if database in ("", ":memory:"):
        return DatabaseIdentity("sqlite-memory")
    path = Path(database)
    return DatabaseIdentity("sqlite-file", path=path, real_path=Path(os.path.realpath(path)))


def _sqlite_uri_path(database: str, mode: object) -> tuple[str, bool]:
    """(file path, in memory?) of a SQLite URI filename (`file:x.db?mode=memory`, uri=true)."""
    if not database.startswith("file:"):
        return database, str(mode) == "memory"
    split = urlsplit(database)
    inner_mode = parse_qs(split.query).get("mode", [str(mode)])[-1]
    path = split.path
    return path, inner_mode == "memory" or str(mode) == "memory" or path in ("", ":memory:")
