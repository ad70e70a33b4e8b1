"""A config reload asked through the cluster database (`slotmap config-reload`, POST
/api/config/reload): the CLI and the dashboard may run on other hosts than the active manager,
so they write a row, and the manager takes the unhandled rows about every second."""
from __future__ import annotations

from typing import Literal

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from manager.storage.db import ManagerRequest

CONFIG_RELOAD = "config_reload"
Door = Literal["api", "cli"]
# Rows taken at once: a flood of requests is one reload, and one bounded read.
TAKE_AT_MOST = 100


def request_reload(engine: Engine, *, door: Door, now_unix: float) -> int:
    with Session(engine) as session, session.begin():
        row = ManagerRequest(kind=CONFIG_RELOAD, door=door, requested_at_unix=now_unix)
        session.add(row)
        session.flush()
        return row.id


def take_reload_requests(engine: Engine, *, now_unix: float) -> list[str]:
    """The doors of the reloads asked and not yet handled; marked handled."""
    with Session(engine) as session, session.begin():
        rows = session.scalars(
            select(ManagerRequest).where(ManagerRequest.kind == CONFIG_RELOAD,
                                         ManagerRequest.handled_at_unix.is_(None))
            .order_by(ManagerRequest.id).limit(TAKE_AT_MOST).with_for_update()
        ).all()
        for row in rows:
            row.handled_at_unix = now_unix
        return [row.door for row in rows]
