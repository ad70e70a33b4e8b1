"""Dashboard roles (issue 29 point 4): a viewer token reads (job data only when configured),
an operator token acts like the admin's; the page says who is signed in and why an action
is missing. The real app over the sample database."""
from __future__ import annotations

from pathlib import Path

import pytest
from admin_testing import MakeClient
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from admin_ui.auth import SESSION_COOKIE
from admin_ui.settings import dashboard_role_tokens
from config.errors import ConfigError
from config.models import ClusterConfig
from manager.storage.db import Event

ADMIN, OPERATOR, VIEWER = "admin-token-1", "operator-token-2", "viewer-token-3"
ROLES = (("operator", OPERATOR), ("viewer", VIEWER))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def events(engine: Engine, actor: str = "admin") -> list[Event]:
    with Session(engine) as session:
        return list(session.scalars(select(Event).where(Event.actor == actor)))


def test_a_viewer_reads_but_never_acts_and_the_page_says_why(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=ADMIN, role_tokens=ROLES, protect_reads=True)
    assert client.get("/api/queues").status_code == 401  # reads protected: a token is needed
    assert client.get("/api/queues", headers=bearer(VIEWER)).status_code == 200
    refused = client.post("/api/queues/mail_send/pause", headers=bearer(VIEWER))
    assert refused.status_code == 403
    assert "signed in as viewer" in refused.json()["detail"]
    page = client.get("/queues/mail_send", headers=bearer(VIEWER)).text
    assert 'id="signed-in-role"' in page and ">viewer</span>" in page
    assert 'action="/queues/mail_send/pause"' not in page
    assert ("Signed in as viewer: to pause the queue or change its slots you need the operator or admin token"
            in page)
    schedules = client.get("/schedules", headers=bearer(VIEWER)).text
    assert "signed in as viewer: changes need the operator or admin token" in schedules
    assert events(engine) == [] and events(engine, "viewer") == []


def test_an_operator_acts_and_the_page_says_operator(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=ADMIN, role_tokens=ROLES)
    page = client.get("/queues/mail_send", headers=bearer(OPERATOR)).text
    assert ">operator</span>" in page and 'action="/queues/mail_send/pause"' in page
    assert client.post("/api/queues/mail_send/pause", headers=bearer(OPERATOR)).status_code == 200
    # Its event names the operator (before: "admin", as if the admin token had done it).
    [event] = events(engine, "operator")
    assert event.message == "pause of mail_send requested by operator"
    assert events(engine) == []
    assert client.post("/api/queues/mail_send/resume", headers=bearer(ADMIN)).status_code == 200
    assert [event.message for event in events(engine)] == ["resume of mail_send requested by admin"]


def test_a_viewer_logs_in_with_the_form_and_its_cookie_is_a_viewers(make_client: MakeClient) -> None:
    client = make_client(token=ADMIN, role_tokens=ROLES)
    response = client.post("/login", data={"token": VIEWER, "next": "/queues/mail_send"},
                           headers={"Origin": "http://testserver"}, follow_redirects=False)
    assert response.status_code == 303 and SESSION_COOKIE in response.cookies
    assert ">viewer</span>" in client.get("/queues/mail_send").text
    assert client.post("/api/queues/mail_send/pause", headers={"Origin": "http://testserver"}).status_code == 403


@pytest.mark.parametrize(("viewer_job_data", "status"), [(False, 401), (True, 503)])
def test_job_data_is_the_viewers_only_when_configured(make_client: MakeClient, viewer_job_data: bool,
                                                     status: int) -> None:
    """503: past the access check, no queue server is configured in these tests."""
    client = make_client(token=ADMIN, role_tokens=ROLES, viewer_job_data=viewer_job_data)
    response = client.get("/api/queues/mail_send/jobs?state=dead", headers=bearer(VIEWER))
    assert response.status_code == status, response.text
    if status == 401:
        assert "viewer_job_data" in response.json()["detail"]
    assert client.get("/api/queues/mail_send/jobs?state=dead", headers=bearer(OPERATOR)).status_code == 503


def test_role_token_files_are_private_and_distinct(tmp_path: Path) -> None:
    same = tmp_path / "same.token"
    same.write_text("same-token\n")
    config = ClusterConfig.model_validate({"admin": {"viewer_token_file": str(same),
                                                     "operator_token_file": str(same)}})
    with pytest.raises(ConfigError, match="same token"):
        dashboard_role_tokens(config)
    same.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        dashboard_role_tokens(config)
