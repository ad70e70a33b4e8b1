"""Who may read and who may act: the admin token, and optionally an operator and a viewer
token (issue 29; each sent as Bearer, as the HTTP basic password or by cookie), where they
come from, and how often a client may guess one.

- admin and operator: every action (retry, delete, cancel, schedules, limiter resume) and
  job data; viewer: reads, and job data and errors only with `[admin] viewer_job_data`.
- Without any token the dashboard is read-only for everyone (as before)."""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import Request

from admin_ui.errors import ActionsDisabled, NotAuthenticated
from admin_ui.settings import AdminSettings
from config.endpoints import check_token
from config.errors import ConfigError
from config.models import ClusterConfig
from config.secret_files import read_private_text

SESSION_COOKIE = "slotmap_admin"
REALM = "slotmap admin"


ADMIN, OPERATOR, VIEWER = "admin", "operator", "viewer"
ACTING_ROLES = frozenset((ADMIN, OPERATOR))


@dataclass(frozen=True, slots=True)
class Access:
    """What the current request may do; pages show action forms only when `can_act`, and
    say why they are missing (`why_no_act`)."""

    token_configured: bool
    role: str | None  # the token presented: admin, operator, viewer (None: none or wrong)
    protect_reads: bool
    viewer_job_data: bool = False

    @property
    def authenticated(self) -> bool:
        return self.role is not None

    @property
    def actor(self) -> str:
        """Who its events name: the role of the token (an operator's retry is not the admin's)."""
        return self.role or ADMIN

    @property
    def can_read(self) -> bool:
        return self.authenticated or not self.protect_reads

    @property
    def can_act(self) -> bool:
        return self.token_configured and self.role in ACTING_ROLES

    @property
    def can_read_jobs(self) -> bool:
        """Jobs' data and errors: with a token configured, the acting roles' (and the
        viewer's when configured); without one, a local read-only dashboard shows them."""
        return (not self.token_configured or self.role in ACTING_ROLES
                or (self.role == VIEWER and self.viewer_job_data))

    @property
    def why_no_act(self) -> str:
        """Why the action forms are missing (empty when they are shown)."""
        if self.can_act:
            return ""
        if not self.token_configured:
            return "read-only: no [admin] token is configured, so no changes are allowed"
        if self.role == VIEWER:
            return "signed in as viewer: changes need the operator or admin token"
        return "changes need the operator or admin token: log in"


def session_value(token: str) -> str:
    """The login cookie: derived from the token, so the cookie never holds the token itself."""
    return hmac.new(token.encode(), b"slotmap-admin-session", hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _basic_password(credentials: str) -> str | None:
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    _user, sep, password = decoded.partition(":")
    return password if sep else None


def dashboard_tokens(settings: AdminSettings) -> list[tuple[str, str]]:
    """(role, token) of every configured token, the admin's first."""
    admin = [(ADMIN, settings.token)] if settings.token is not None else []
    return admin + list(settings.role_tokens)


def role_of_token(given: str, settings: AdminSettings) -> tuple[str, str] | None:
    """The (role, token) a login form's token is; every token compared in constant time."""
    found = None
    for role, token in dashboard_tokens(settings):
        if _same(given, token) and found is None:
            found = (role, token)
    return found


def request_role(request: Request, settings: AdminSettings) -> str | None:
    """The role of the credential the request presents (None: none, or a wrong one)."""
    found = None
    for role, token in dashboard_tokens(settings):
        if token_matches(request, token) and found is None:
            found = role
    return found


def token_matches(request: Request, token: str) -> bool:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return _same(credentials.strip(), token)
    if scheme.lower() == "basic":
        password = _basic_password(credentials)
        return password is not None and _same(password, token)
    cookie = request.cookies.get(SESSION_COOKIE)
    return cookie is not None and _same(cookie, session_value(token))


def access_of(request: Request, settings: AdminSettings) -> Access:
    configured = settings.token is not None or bool(settings.role_tokens)
    return Access(
        token_configured=configured,
        role=request_role(request, settings) if configured else None,
        protect_reads=settings.protect_reads and configured,
        viewer_job_data=settings.viewer_job_data,
    )


def require_read(access: Access) -> None:
    if not access.can_read:
        raise NotAuthenticated("this dashboard needs a token to read (viewer, operator or admin)", why="read")


def require_act(access: Access) -> None:
    if not access.token_configured:
        raise ActionsDisabled("read-only: no [admin] token is configured, so no changes are allowed")
    if not access.authenticated:
        raise NotAuthenticated("changing a queue needs the operator or admin token")
    if not access.can_act:
        raise ActionsDisabled(f"signed in as {access.role}: changing a queue needs the operator or admin token")


# Where the token comes from: never a command line (`ps` shows it to every user).

TOKEN_ENV = "SLOTMAP_ADMIN_TOKEN"
TOKEN_FILE_ENV = "SLOTMAP_ADMIN_TOKEN_FILE"


def admin_token(config: ClusterConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """The admin token: $SLOTMAP_ADMIN_TOKEN, $SLOTMAP_ADMIN_TOKEN_FILE, [admin] token_file,
    then [admin] token; None when none is set. ConfigError for an unreadable file or a
    token no client can send (empty, spaces, non-ASCII)."""
    # Set but empty is refused, not taken for "no token": that silently disabled auth.
    if TOKEN_ENV in environ:
        return _sendable(environ[TOKEN_ENV], f"${TOKEN_ENV}")
    path = environ.get(TOKEN_FILE_ENV) or config.admin.token_file
    if path:
        try:
            text = read_private_text(path, "admin token file")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return _sendable(text.splitlines()[0] if text.strip() else "", f"admin token file {path}")
    return config.admin.token


def check_settings(token: str | None, *, protect_reads: bool) -> None:
    """ConfigError for settings that would silently weaken the dashboard."""
    if token is not None:
        _sendable(token, "the admin token")
    if protect_reads and token is None:
        raise ConfigError(
            "protect_reads needs an admin token ([admin] token_file, $SLOTMAP_ADMIN_TOKEN or "
            "[admin] token): without one, reads would be open to everyone"
        )


def _sendable(token: str, what: str) -> str:
    try:
        return check_token(token, what=what)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


# Wrong credentials: slowed down per client.

# The first FREE_FAILURES wrong tokens of a client cost nothing (typos); then each one
# closes the door to that client for DELAY_S doubling up to MAX_DELAY_S: about 10
# guesses a minute at most. A client's record is dropped after FORGET_AFTER_S of quiet.
FREE_FAILURES = 3
DELAY_S = 1.0
MAX_DELAY_S = 60.0
FORGET_AFTER_S = 900.0
MAX_CLIENTS_TRACKED = 10_000


@dataclass(slots=True)
class Failures:
    count: int
    last_at: float
    blocked_until: float


class LoginThrottle:
    """Failed logins per client address (pure: the clock is passed in)."""

    def __init__(self) -> None:
        self._clients: dict[str, Failures] = {}

    def wait_s(self, client: str, now: float) -> float:
        """How long `client` must wait before its credentials are looked at again (0: now)."""
        record = self._clients.get(client)
        return max(0.0, record.blocked_until - now) if record is not None else 0.0

    def failed(self, client: str, now: float) -> Failures:
        record = self._clients.pop(client, None)
        if record is None or now - record.last_at > FORGET_AFTER_S:
            record = Failures(0, now, now)
        record.count += 1
        record.last_at = now
        over = record.count - FREE_FAILURES
        record.blocked_until = now + (min(DELAY_S * 2 ** (over - 1), MAX_DELAY_S) if over > 0 else 0.0)
        self._clients[client] = record  # re-inserted last: the oldest go first when full
        while len(self._clients) > MAX_CLIENTS_TRACKED:
            del self._clients[next(iter(self._clients))]
        return record

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)
