"""Issue 16 on a real `slotmap admin` (uvicorn): the Host header must be one of the dashboard's
names, a guessed session cookie counts as a wrong token, and X-Forwarded-For is believed
only from [admin] trusted_proxies. Each test fails on f5016ee (said per test).

The tests of the default settings share one dashboard: each is a client of its own (its own
loopback address, so its own wrong-token count) and reads only the log written since it began."""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import admin_sample
import httpx
import pytest
from admin_proc import AdminProc, start_admin
from procs import toml_value

from admin_ui.auth import FREE_FAILURES, SESSION_COOKIE, session_value

TOKEN = "doors-test-token-0123"


def config_with(database_url: str, root: Path, name: str, **admin: object) -> Path:
    """The sample's config with an admin token (from a 0600 file) and `admin` settings."""
    token_file = root / "admin.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    lines = [f"{key} = {toml_value(value)}" for key, value in {"token_file": str(token_file), **admin}.items()]
    config = root / f"{name}.toml"
    config.write_text(admin_sample.config_toml(database_url) + "\n[admin]\n" + "\n".join(lines) + "\n")
    return config


@pytest.fixture(scope="module")
def tuned_admin(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminProc]:
    """The dashboard with a name of its own and a trusted proxy: the host check's test sends
    no X-Forwarded-For, the proxy's test no Host but the dashboard's own."""
    root = tmp_path_factory.mktemp("doors_tuned")
    proc = start_admin(config_with(module_database_url, root, "cluster", allowed_hosts=["dash.example.org"],
                                   trusted_proxies=["127.0.0.0/8"]), root)
    yield proc
    proc.stop_later()


@dataclass
class Door:
    """The module's dashboard of default settings as one client sees it: requests from
    `address`, and the log since the test began."""
    admin: AdminProc
    address: str
    log_from: int

    @property
    def url(self) -> str:
        return self.admin.url

    def _client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(local_address=self.address), timeout=5.0)

    def get(self, path: str, *, cookies: dict[str, str] | None = None, **kwargs: object) -> httpx.Response:
        with self._client() as client:
            client.cookies.update(cookies or {})
            return client.get(self.url + path, **kwargs)  # type: ignore[arg-type]

    def post(self, path: str, *, cookies: dict[str, str] | None = None, **kwargs: object) -> httpx.Response:
        with self._client() as client:
            client.cookies.update(cookies or {})
            return client.post(self.url + path, **kwargs)  # type: ignore[arg-type]

    def log_text(self) -> str:
        return self.admin.log_text()[self.log_from:]


@pytest.fixture(scope="module")
def default_admin(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminProc]:
    root = tmp_path_factory.mktemp("doors")
    proc = start_admin(config_with(module_database_url, root, "cluster"), root)
    yield proc
    proc.stop_later()


# 127.0.0.1 is the X-Forwarded-For test's.
_ADDRESSES = itertools.count(11)


@pytest.fixture
def door(default_admin: AdminProc) -> Door:
    return Door(default_admin, f"127.0.0.{next(_ADDRESSES)}", len(default_admin.log_text()))


def test_a_host_header_that_is_not_one_of_the_dashboards_names_gets_400(tuned_admin: AdminProc) -> None:
    """On f5016ee `Host: rebound.example` was served (200): the precondition of DNS rebinding."""
    admin = tuned_admin
    port = admin.port
    for host in (f"rebound.example:{port}", "rebound.example", f"127.0.0.1.rebound.example:{port}",
                 f"dash.example.org.evil:{port}"):
        response = admin.get("/api/queues", headers={"Host": host})
        assert response.status_code == 400, (host, response.text)
        assert "allowed_hosts" in response.text
        assert response.headers["x-frame-options"] == "DENY"
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}",
                 f"dash.example.org:{port}", "Dash.Example.Org."):
        assert admin.get("/api/queues", headers={"Host": host}).status_code == 200, host
    assert "refused requests for Host 'rebound.example:" in admin.log_text()


def test_guessed_session_cookies_are_slowed_down_and_logged(door: Door) -> None:
    """On f5016ee a wrong cookie was neither counted nor logged: every guess got its 200."""
    admin = door
    statuses = []
    for attempt in range(FREE_FAILURES + 1):
        response = admin.get("/api/health", cookies={SESSION_COOKIE: session_value(f"guess-{attempt}")})
        statuses.append(response.status_code)
        assert f'{SESSION_COOKIE}=""' in response.headers.get("set-cookie", ""), "a wrong cookie is cleared"
    blocked = admin.get("/api/health", cookies={SESSION_COOKIE: session_value("guess-next")})
    assert statuses == [200] * (FREE_FAILURES + 1) and blocked.status_code == 429, (statuses, blocked)
    # The right cookie waits like any other credential from that address.
    assert admin.get("/api/health", cookies={SESSION_COOKIE: session_value(TOKEN)}).status_code == 429
    log = admin.log_text()
    assert (f"wrong admin token from {door.address} (session cookie, GET /api/health): {FREE_FAILURES + 1} "
            "in a row") in log
    assert session_value("guess-0") not in log


def test_rotating_x_forwarded_for_does_not_reset_the_throttle(default_admin: AdminProc) -> None:
    """On f5016ee uvicorn believed X-Forwarded-For from 127.0.0.1: every wrong token from a
    new made-up address was a first one, never slowed down."""
    # From 127.0.0.1, the one address uvicorn believes by default (no other test here uses it).
    door = admin = Door(default_admin, "127.0.0.1", len(default_admin.log_text()))
    statuses = [
        admin.get("/api/health", headers={"Authorization": f"Bearer wrong-{n}",
                                          "X-Forwarded-For": f"10.9.{n}.{n + 1}"}).status_code
        for n in range(FREE_FAILURES + 3)
    ]
    assert 429 in statuses, statuses
    assert f"wrong admin token from {door.address} " in admin.log_text()
    assert "10.9." not in admin.log_text()


def test_x_forwarded_for_from_a_trusted_proxy_names_the_client(tuned_admin: AdminProc) -> None:
    admin = tuned_admin
    for n in range(FREE_FAILURES + 1):
        wrong = admin.get("/api/health", headers={"Authorization": f"Bearer wrong-{n}",
                                                  "X-Forwarded-For": "10.9.0.1"})
        assert wrong.status_code == 200
    assert admin.get("/api/health", headers={"Authorization": "Bearer x",
                                             "X-Forwarded-For": "10.9.0.1"}).status_code == 429
    # Another client behind the same proxy is not held back by the first one's guesses.
    assert admin.get("/api/health", headers={"Authorization": f"Bearer {TOKEN}",
                                             "X-Forwarded-For": "10.9.0.2"}).status_code == 200
    assert "wrong admin token from 10.9.0.1 (bearer" in admin.log_text()


@pytest.mark.parametrize(("admin", "error"), [
    ({"allowed_hosts": ["bad host"]}, "neither an IP address nor a host name"),
    ({"trusted_proxies": ["proxy.example"]}, "not an IP address or network"),
])
def test_bad_door_settings_are_config_errors(admin: dict[str, object], error: str) -> None:
    from config.errors import ConfigError
    from config.load import parse_config

    with pytest.raises(ConfigError, match=error):
        parse_config({"admin": admin})


def test_a_star_turns_the_host_check_off_and_names_are_normalised() -> None:
    from admin_ui.host_check import allowed_names
    from config.load import parse_config

    config = parse_config({"admin": {"allowed_hosts": ["*", "Dash.Example.ORG.", "[fe80::1]"]}})
    assert config.admin.allowed_hosts == ["*", "dash.example.org", "fe80::1"]
    assert allowed_names(config.admin.allowed_hosts, "0.0.0.0") == {
        "*", "dash.example.org", "fe80::1", "localhost", "127.0.0.1", "::1"}



def test_a_logged_in_browser_does_not_wipe_the_guesses_of_its_address(door: Door) -> None:
    """Guesses and a logged-in dashboard from one address (a NAT, this machine): the
    browser's refreshes with the right cookie do not start the guesser's count over."""
    admin = door
    right = {SESSION_COOKIE: session_value(TOKEN)}
    statuses = []
    for n in range(FREE_FAILURES + 3):
        statuses.append(admin.get("/api/health", headers={"Authorization": f"Bearer wrong-{n}"}).status_code)
        admin.get("/api/health", cookies=right)
    assert statuses[:FREE_FAILURES] == [200] * FREE_FAILURES and 429 in statuses, statuses


def test_a_login_with_a_stale_cookie_logs_in(door: Door) -> None:
    """The form decides a login: a cookie left from an older token neither counts as a
    failure nor has the new cookie deleted behind it."""
    admin = door
    stale = {SESSION_COOKIE: session_value("the-old-token")}
    login = admin.post("/login", data={"token": TOKEN, "next": "/queues"}, cookies=stale)
    assert login.status_code == 303, login.text
    assert login.headers.get_list("set-cookie") == [
        header for header in login.headers.get_list("set-cookie") if session_value(TOKEN) in header
    ], login.headers.get_list("set-cookie")
    assert "wrong admin token" not in admin.log_text()
