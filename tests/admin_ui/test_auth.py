"""Access: read-only without a token; actions need the token and leave QueueOverride and Event rows."""
from __future__ import annotations

import base64

import pytest
from admin_sample import NOW
from admin_testing import CLOCK, MakeClient
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from admin_ui.auth import SESSION_COOKIE
from config.errors import ConfigError
from manager.storage.db import Event, QueueOverride

TOKEN = "s3cret-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def basic(password: str, user: str = "admin") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def admin_events(engine: Engine) -> list[Event]:
    with Session(engine) as session:
        return list(session.scalars(select(Event).where(Event.actor == "admin").order_by(Event.id)))


def override_of(engine: Engine, queue: str) -> QueueOverride | None:
    with Session(engine) as session:
        return session.get(QueueOverride, queue)


def test_without_a_token_anyone_reads_and_nobody_acts(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=None)
    assert client.get("/api/queues").status_code == 200
    response = client.post("/api/queues/mail_send/pause", headers=BEARER)
    assert response.status_code == 403
    assert "read-only" in response.json()["detail"]
    assert "read-only" in client.get("/queues").text
    assert 'action="/queues/mail_send/pause"' not in client.get("/queues/mail_send").text
    assert override_of(engine, "mail_send") is None and admin_events(engine) == []


def test_with_a_token_reads_stay_open_but_actions_need_it(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=TOKEN)
    assert client.get("/api/queues").status_code == 200
    assert client.get("/metrics").status_code == 200
    refused = client.post("/api/queues/mail_send/pause")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic")
    assert client.post("/api/queues/mail_send/pause", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/api/queues/mail_send/pause", headers=basic("wrong")).status_code == 401
    assert client.post("/api/queues/mail_send/pause", headers={"Authorization": "Basic !!"}).status_code == 401
    assert override_of(engine, "mail_send") is None and admin_events(engine) == []


def test_pause_with_the_bearer_token_writes_an_override_and_an_admin_event(
    make_client: MakeClient, engine: Engine,
) -> None:
    response = make_client(token=TOKEN).post("/api/queues/mail_send/pause", headers=BEARER)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["override"]["paused"] is True
    override = override_of(engine, "mail_send")
    assert override is not None and override.paused and override.updated_at_unix == CLOCK
    [event] = admin_events(engine)
    assert (event.id, event.kind, event.queue, event.at_unix) == (body["event_id"], "pause_requested",
                                                                  "mail_send", CLOCK)
    assert event.detail is not None and event.detail["paused"] is True


def test_resume_with_the_basic_password_clears_the_pause(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=TOKEN)
    client.post("/api/queues/likes_delete/pause", headers=basic(TOKEN))
    response = client.post("/api/queues/likes_delete/resume", headers=basic(TOKEN, user="anyone"))
    assert response.status_code == 200
    override = override_of(engine, "likes_delete")
    assert override is not None and not override.paused
    assert [event.kind for event in admin_events(engine)] == ["pause_requested", "resume_requested"]


def test_limits_override_min_and_max_and_null_gives_them_back_to_the_config(
    make_client: MakeClient, engine: Engine,
) -> None:
    client = make_client(token=TOKEN)
    response = client.put("/api/queues/mail_send/limits", headers=BEARER,
                          json={"min_slots": 5, "max_slots": 50})
    assert response.status_code == 200, response.text
    override = override_of(engine, "mail_send")
    assert override is not None and (override.min_slots, override.max_slots) == (5, 50)
    client.put("/api/queues/mail_send/limits", headers=BEARER, json={"min_slots": None, "max_slots": 30})
    override = override_of(engine, "mail_send")
    assert override is not None and (override.min_slots, override.max_slots) == (None, 30)
    events = admin_events(engine)
    assert [event.kind for event in events] == ["limits_changed", "limits_changed"]
    assert events[1].detail is not None
    assert events[1].detail["previous"] == {"min_slots": 5, "max_slots": 50}
    assert events[1].detail["effective_min_slots"] == 2  # from the config
    assert "2..30" in events[1].message


def test_limits_that_would_put_min_above_max_are_refused(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=TOKEN)
    response = client.put("/api/queues/mail_send/limits", headers=BEARER, json={"min_slots": 45})
    assert response.status_code == 422
    assert "above max_slots 40" in response.json()["detail"]
    assert client.put("/api/queues/mail_send/limits", headers=BEARER,
                      json={"min_slots": -1}).status_code == 422
    assert client.put("/api/queues/mail_send/limits", headers=BEARER,
                      json={"slots": 3}).status_code == 422
    assert override_of(engine, "mail_send") is None and admin_events(engine) == []


def test_actions_on_an_unknown_queue_are_not_found(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=TOKEN)
    assert client.post("/api/queues/no_such_queue/pause", headers=BEARER).status_code == 404
    assert admin_events(engine) == []


def test_a_configured_queue_never_reported_can_be_paused(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=TOKEN)
    assert client.post("/api/queues/newsletter/pause", headers=BEARER).status_code == 200


def test_login_form_sets_a_cookie_that_is_not_the_token_and_lets_forms_act(
    make_client: MakeClient, engine: Engine,
) -> None:
    client = make_client(token=TOKEN)
    page = client.get("/queues/mail_send")
    assert "Log in" in page.text and 'action="/queues/mail_send/pause"' not in page.text
    wrong = client.post("/login", data={"token": "nope", "next": "/queues/mail_send"})
    assert wrong.status_code == 401 and "wrong token" in wrong.text
    login = client.post("/login", data={"token": TOKEN, "next": "/queues/mail_send"}, follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/queues/mail_send"
    cookie = login.cookies[SESSION_COOKIE]
    assert TOKEN not in cookie
    assert "samesite=strict" in login.headers["set-cookie"].lower()
    assert "httponly" in login.headers["set-cookie"].lower()
    page = client.get("/queues/mail_send")
    assert 'action="/queues/mail_send/pause"' in page.text
    paused = client.post("/queues/mail_send/pause", follow_redirects=False)
    assert paused.status_code == 303 and paused.headers["location"] == "/queues/mail_send"
    limits = client.post("/queues/mail_send/limits", data={"min_slots": "3", "max_slots": ""},
                         follow_redirects=False)
    assert limits.status_code == 303
    override = override_of(engine, "mail_send")
    assert override is not None and override.paused and (override.min_slots, override.max_slots) == (3, None)
    page = client.get("/queues/mail_send").text
    assert "Resume mail_send" in page and "pause_requested" in page
    client.post("/logout")
    assert client.post("/queues/mail_send/resume", follow_redirects=False).status_code == 401


def test_a_bad_limits_form_shows_the_reason(make_client: MakeClient) -> None:
    client = make_client(token=TOKEN)
    response = client.post("/queues/mail_send/limits", data={"min_slots": "many"}, headers=BEARER)
    assert response.status_code == 422 and "whole number" in response.text


def test_a_change_asked_by_another_site_is_refused_even_with_basic_credentials(
    make_client: MakeClient, engine: Engine,
) -> None:
    client = make_client(token=TOKEN)
    headers = {**basic(TOKEN), "Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"}
    assert client.post("/queues/mail_send/pause", headers=headers, follow_redirects=False).status_code == 401
    headers = {**basic(TOKEN), "Sec-Fetch-Site": "cross-site"}
    assert client.post("/queues/mail_send/pause", headers=headers, follow_redirects=False).status_code == 401
    assert client.post("/api/queues/mail_send/pause", headers=headers).status_code == 401
    assert client.post("/api/queues/mail_send/pause",
                       headers={**basic(TOKEN), "Origin": "http://evil.example"}).status_code == 401
    assert admin_events(engine) == []
    same_site = {**basic(TOKEN), "Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    assert client.post("/api/queues/mail_send/pause", headers=same_site).status_code == 200


def test_login_only_redirects_within_the_site(make_client: MakeClient) -> None:
    client = make_client(token=TOKEN)
    for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        login = client.post("/login", data={"token": TOKEN, "next": target}, follow_redirects=False)
        assert login.headers["location"] == "/queues"


def test_protected_reads_send_pages_to_login_and_the_api_a_401(make_client: MakeClient) -> None:
    client = make_client(token=TOKEN, protect_reads=True)
    page = client.get("/slotmap?x=1", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/slotmap%3Fx%3D1&why=read"
    assert client.get("/api/queues").status_code == 401
    assert client.get("/metrics").status_code == 401
    assert client.get("/queues/mail_send/charts/slots.svg", follow_redirects=False).status_code == 303
    assert client.get("/login").status_code == 200
    assert client.get("/static/app.css").status_code == 200
    assert client.get("/api/queues", headers=BEARER).json()["at_unix"] == NOW
    assert client.get("/metrics", headers=basic(TOKEN)).status_code == 200


def test_protect_reads_without_a_token_is_a_config_error(make_client: MakeClient) -> None:
    # It used to leave reads open without a word (issue 10): now the dashboard does not start.
    with pytest.raises(ConfigError, match="protect_reads needs an admin token"):
        make_client(token=None, protect_reads=True)


def test_a_page_sent_to_log_in_says_why_and_which_tokens_open_it(make_client: MakeClient) -> None:
    client = make_client(token=TOKEN)
    for path in ("/failures", "/busy", "/jobs?state=dead&queue=mail_send"):
        sent = client.get(path, follow_redirects=False)
        assert sent.status_code == 303 and sent.headers["location"].endswith("&why=job-data"), path
        login = client.get(sent.headers["location"]).text
        assert "it needs the operator or admin token" in login and "job data and errors" in login
        assert f"Log in to open <code>{path.replace('&', '&amp;')}</code>" in login
        assert 'name="why" value="job-data"' in login  # a wrong token's answer still says why
    # The form names every token that signs in, not the admin's alone (an operator's works too).
    assert ">Token <input" in client.get("/login").text and "operator" in client.get("/login").text
    # Only the fixed reasons are shown: an address cannot put words of its own on the page.
    assert 'id="login-why"' not in client.get("/login?next=/queues&why=Your+session+expired").text
    wrong = client.post("/login", data={"token": "nope", "next": "/failures", "why": "job-data"})
    assert wrong.status_code == 401 and 'id="login-why"' in wrong.text


def test_the_log_in_link_keeps_the_query_so_a_search_comes_back_after_signing_in(
    make_client: MakeClient,
) -> None:
    page = make_client(token=TOKEN).get("/events?kind=slots_moved").text
    assert 'id="login-link"' in page and "/login?next=/events%3Fkind%3Dslots_moved" in page
