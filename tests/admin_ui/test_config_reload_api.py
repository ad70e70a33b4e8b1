"""POST /api/config/reload (issue 27 point 4): the admin token only; it leaves a request the
active manager takes (tests/manager/test_config_reload_procs.py runs that side for real)."""
from __future__ import annotations

from admin_testing import MakeClient
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from manager.reloading.reload_requests import take_reload_requests
from manager.storage.db import ManagerRequest

ADMIN, OPERATOR, VIEWER = "admin-token-1", "operator-token-2", "viewer-token-3"
ROLES = (("operator", OPERATOR), ("viewer", VIEWER))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_only_the_admin_token_asks_the_manager_for_a_config_reload(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=ADMIN, role_tokens=ROLES)
    assert client.post("/api/config/reload").status_code == 401
    for token in (OPERATOR, VIEWER):
        refused = client.post("/api/config/reload", headers=bearer(token))
        assert refused.status_code == 403, refused.text
    with Session(engine) as session:
        assert session.scalars(select(ManagerRequest)).all() == []
    asked = client.post("/api/config/reload", headers=bearer(ADMIN))
    assert asked.status_code == 200 and asked.json()["request_id"] >= 1
    assert take_reload_requests(engine, now_unix=1.0) == ["api"]
    assert take_reload_requests(engine, now_unix=2.0) == []  # taken once
