"""The dashboard's door on a real `slotmap admin` process (issue 10): frame and sniffing headers on
every response, no state change from an opaque origin, wrong tokens slowed per client, the token
from a file and never on the command line."""
from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from admin_proc import AdminProc, sample_admin
from polling import DEADLINE_S, poll_until
from sqlalchemy.orm import Session

from admin_ui.auth import DELAY_S, FREE_FAILURES
from manager.storage.db import QueueOverride, make_engine

TOKEN = "guard-test-token-0123"
WRONG = "not-the-token-but-close"
SECURITY_HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
}


def csp_of(response: httpx.Response) -> str:
    return response.headers.get("content-security-policy", "")


@pytest.fixture(scope="module")
def admin(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminProc]:
    """One dashboard for the module: the tests change no queue but their own, and each
    guesser's address is its own (127.0.0.1 stays unthrottled for the others)."""
    root = tmp_path_factory.mktemp("guard")
    token_file = root / "admin.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with sample_admin(module_database_url, root, extra_toml=f'\n[admin]\ntoken_file = "{token_file}"\n') as proc:
        yield proc


@pytest.fixture
def database_url(module_database_url: str) -> str:
    return module_database_url


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client_from(address: str) -> httpx.Client:
    """A client whose connections come from `address` (another loopback address is another client)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=DEADLINE_S)


def test_every_response_forbids_framing_and_sniffing(admin: AdminProc) -> None:
    responses = [
        admin.get("/queues"), admin.get("/api/queues"), admin.get("/static/app.css"),
        admin.get("/metrics"), admin.get("/docs"), admin.get("/no/such/page"),
        httpx.post(admin.url + "/api/queues/mail_send/pause", timeout=5.0),
        httpx.post(admin.url + "/api/queues/mail_send/pause", headers={"Origin": "null"}, timeout=5.0),
    ]
    statuses = [r.status_code for r in responses]
    assert statuses[:5] == [200] * 5 and statuses[5] == 404 and statuses[6:] == [401, 401], statuses
    for response in responses:
        for name, value in SECURITY_HEADERS.items():
            assert response.headers.get(name) == value, (response.request.url, dict(response.headers))
        assert "frame-ancestors 'none'" in csp_of(response)
        # Only our own script files run, except Swagger's inline start on /docs.
        if response.request.url.path != "/docs":
            assert "script-src 'self';" in csp_of(response) and "unsafe-inline" not in csp_of(response)


def test_a_state_change_from_an_opaque_origin_is_refused_even_with_the_token(
    admin: AdminProc, database_url: str,
) -> None:
    pause = admin.url + "/api/queues/mail_send/pause"
    refused = httpx.post(pause, headers={**bearer(TOKEN), "Origin": "null"}, timeout=5.0)
    assert refused.status_code == 401 and "Origin: null" in refused.json()["detail"]
    form = httpx.post(admin.url + "/queues/mail_send/pause", headers={**bearer(TOKEN), "Origin": "null"},
                      timeout=5.0)
    assert form.status_code == 401
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            assert session.get(QueueOverride, "mail_send") is None
    finally:
        engine.dispose()
    assert "refused POST /api/queues/mail_send/pause from 127.0.0.1" in admin.log_text()
    # The same request from the dashboard's own origin goes through.
    accepted = httpx.post(pause, headers={**bearer(TOKEN), "Origin": admin.url}, timeout=5.0)
    assert accepted.status_code == 200, accepted.text


def blocked_round(admin: AdminProc, other: httpx.Client, address: str) -> httpx.Response | None:
    """A guesser from `address` (a client with no failures yet) guesses until it is blocked,
    then the checks below run; the blocked guess's 429, or None when a check was answered
    too late to tell anything."""
    pause = admin.url + "/api/queues/mail_send/pause"
    health = admin.url + "/api/health"
    with client_from(address) as guesser:
        for _ in range(FREE_FAILURES):
            assert guesser.post(pause, headers=bearer(WRONG)).status_code == 401
        blocking_sent_at = time.monotonic()
        # A wrong token on a page anyone may read counts too (the page would tell a right one).
        assert guesser.get(health, headers=bearer(WRONG)).status_code == 200
        checks: list[tuple[str, int, Callable[[], httpx.Response]]] = [
            # Meanwhile another client is served at once.
            ("another client", 200, lambda: other.get(health, headers=bearer(TOKEN))),
            ("a wrong token", 429, lambda: guesser.post(pause, headers=bearer(WRONG))),
            # Even the right token waits: the guesser cannot tell a hit while it is blocked.
            ("the right token", 429, lambda: guesser.get(health, headers=bearer(TOKEN))),
            ("the login form", 429,
             lambda: guesser.post(admin.url + "/login", data={"token": WRONG, "next": "/queues"})),
        ]
        answers: dict[str, httpx.Response] = {}
        for what, expected, send in checks:
            answers[what] = send()
            # The block began after the blocking guess was sent and lasts DELAY_S (1 s): an
            # answer before that time came from inside it. A 429 shows the block whenever it
            # came; any other answer after that time proves nothing (a busy machine can leave
            # either process unscheduled for a second): the round is played again.
            if answers[what].status_code != 429 and time.monotonic() >= blocking_sent_at + DELAY_S:
                return None
            assert answers[what].status_code == expected, (address, what, answers[what].text)
    return answers["a wrong token"]


def test_wrong_tokens_slow_that_client_down_while_another_client_is_served(admin: AdminProc) -> None:
    # Each round from another loopback address (another client): 127.0.0.2 is the other one,
    # 127.0.0.1 the other tests' (a round given up leaves its address blocked).
    addresses = iter(f"127.0.0.{n}" for n in range(3, 255))
    address = ""

    def decided() -> httpx.Response | None:
        nonlocal address
        address = next(addresses)
        return blocked_round(admin, other, address)

    with client_from("127.0.0.2") as other:
        blocked = poll_until(decided, what="a round of checks answered inside the guesser's block")
    assert blocked is not None  # for mypy: poll_until returns a truthy value
    assert int(blocked.headers["retry-after"]) >= 1
    for name, value in SECURITY_HEADERS.items():
        assert blocked.headers.get(name) == value
    assert "frame-ancestors 'none'" in csp_of(blocked)
    time.sleep(float(blocked.headers["retry-after"]) + 0.2)  # the penalty itself is the subject
    with client_from(address) as guesser:
        assert guesser.get(admin.url + "/api/health", headers=bearer(TOKEN)).status_code == 200
    log = admin.log_text()
    assert f"wrong admin token from {address} (bearer, GET /api/health): {FREE_FAILURES + 1} in a row" in log
    assert f"wrong admin token from {address} (bearer, POST /api/queues/mail_send/pause): 1 in a row" in log
    assert WRONG not in log and TOKEN not in log


async def burst(url: str, address: str, count: int, *, login: bool) -> tuple[list[int], float]:
    """`count` wrong guesses sent at once from `address`, each on its own connection: their
    statuses and how long the burst took."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    async with httpx.AsyncClient(transport=transport, timeout=DEADLINE_S,
                                 limits=httpx.Limits(max_connections=count)) as guesser:
        started = time.monotonic()
        answers = await asyncio.gather(*(
            guesser.post(url + "/login", data={"token": f"{WRONG}-{n}", "next": "/"}) if login
            else guesser.get(url + "/api/health", headers=bearer(f"{WRONG}-{n}"))
            for n in range(count)))
        return [answer.status_code for answer in answers], time.monotonic() - started


@pytest.mark.parametrize(("address", "login"), [("127.0.1.1", False), ("127.0.1.2", True)])
def test_guesses_sent_at_once_are_throttled_like_guesses_sent_in_turn(
    admin: AdminProc, address: str, login: bool,
) -> None:
    # Counted only once answered, all 20 were checked (none had been answered when the next
    # passed the throttle). Now FREE_FAILURES + 1 are, plus one more per block that ran out
    # during the burst (1 s, then 2 s ...: log2 of the burst's length), on a busy machine.
    statuses, took_s = asyncio.run(burst(admin.url, address, 20, login=login))
    checked = [status for status in statuses if status != 429]
    assert len(checked) <= FREE_FAILURES + 1 + math.floor(math.log2(took_s / DELAY_S + 1)), (statuses, took_s)
    assert set(checked) == {401 if login else 200}, statuses


def test_the_token_comes_from_its_file_and_is_not_on_the_command_line(admin: AdminProc) -> None:
    assert admin.get("/api/health", headers=bearer(TOKEN)).status_code == 200
    cmdline = Path(f"/proc/{admin.process.pid}/cmdline").read_bytes()
    assert TOKEN.encode() not in cmdline
    assert httpx.post(admin.url + "/api/queues/push_notify/pause", headers=bearer(TOKEN),
                      timeout=5.0).status_code == 200


def test_the_penalty_doubles_up_to_a_minute_and_is_forgotten_after_quiet() -> None:
    from admin_ui.auth import FORGET_AFTER_S, MAX_CLIENTS_TRACKED, LoginThrottle

    throttle = LoginThrottle()
    waits = [throttle.failed("a", 0.0).blocked_until for _ in range(10)]
    assert waits == [0.0, 0.0, 0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
    assert throttle.wait_s("a", 30.0) == 30.0 and throttle.wait_s("b", 30.0) == 0.0
    assert throttle.failed("a", 60.0 + FORGET_AFTER_S + 1).count == 1
    throttle.succeeded("a")
    assert throttle.wait_s("a", 0.0) == 0.0
    for n in range(MAX_CLIENTS_TRACKED + 10):
        throttle.failed(f"10.0.{n // 256}.{n % 256}", 0.0)
    assert len(throttle._clients) == MAX_CLIENTS_TRACKED
    # The oldest went first: the first ten are forgotten, the last one is still counted.
    last = f"10.0.{n // 256}.{n % 256}"
    assert "10.0.0.9" not in throttle._clients and "10.0.0.10" in throttle._clients
    assert throttle.failed(last, 0.0).count == 2


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def stream_body(port: int, head: bytes, *, chunked: bool, total_bytes: int) -> tuple[int, bytes]:
    """Send a request head, then body bytes until the server answers or closes; (sent, answer)."""
    import socket

    sent = 0
    chunk = b"\0" * 65536
    piece = b"%x\r\n" % len(chunk) + chunk + b"\r\n" if chunked else chunk
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        sock.settimeout(0.0)
        answer = b""
        try:
            while sent < total_bytes:
                try:
                    answer += sock.recv(65536)
                except BlockingIOError:
                    pass
                if answer:
                    break
                sock.settimeout(10)
                sock.sendall(piece)
                sock.settimeout(0.0)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        sock.settimeout(5)
        try:
            answer += sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            pass
    return sent, answer


def test_huge_request_bodies_are_refused_before_they_are_buffered(admin: AdminProc) -> None:
    port = admin.port
    before = rss_bytes(admin.process.pid)
    announced = (b"PUT /api/queues/mail_send/limits HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 1500000000\r\n\r\n")
    sent, answer = stream_body(port, announced, chunked=False, total_bytes=256 * 1024 * 1024)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"x-frame-options: DENY" in answer.lower().replace(b"deny", b"DENY")
    assert sent < 32 * 1024 * 1024, sent
    chunked = (b"POST /queues/mail_send/pause HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n")
    sent, _ = stream_body(port, chunked, chunked=True, total_bytes=256 * 1024 * 1024)
    assert sent < 64 * 1024 * 1024, sent
    # Meanwhile another client is served, and the process did not take the bodies in.
    assert admin.get("/api/health").status_code == 200
    assert rss_bytes(admin.process.pid) - before < 50 * 1024 * 1024
    assert "refused a 1500000000-byte body to PUT /api/queues/mail_send/limits" in admin.log_text()
