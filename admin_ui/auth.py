"""Who may read and who may act: one admin token, sent as Bearer, as the HTTP basic password or by cookie."""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from fastapi import Request

from admin_ui.errors import ActionsDisabled, NotAuthenticated
from admin_ui.settings import AdminSettings

SESSION_COOKIE = "slotmap_admin"
REALM = "slotmap admin"


@dataclass(frozen=True, slots=True)
class Access:
    """What the current request may do; pages show action forms only when `can_act`."""

    token_configured: bool
    authenticated: bool
    protect_reads: bool

    @property
    def can_read(self) -> bool:
        return self.authenticated or not self.protect_reads

    @property
    def can_act(self) -> bool:
        return self.token_configured and self.authenticated


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
    token = settings.token
    return Access(
        token_configured=token is not None,
        authenticated=token is not None and token_matches(request, token),
        protect_reads=settings.protect_reads and token is not None,
    )


def require_read(access: Access) -> None:
    if not access.can_read:
        raise NotAuthenticated("this dashboard needs the admin token to read")


def require_act(access: Access) -> None:
    if not access.token_configured:
        raise ActionsDisabled("read-only: no [admin] token is configured, so no changes are allowed")
    if not access.authenticated:
        raise NotAuthenticated("changing a queue needs the admin token")
