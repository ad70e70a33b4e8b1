"""The dashboard answers only to its own names: a request whose Host header names anything else gets 400.

DNS rebinding needs the opposite: a page of evil.example whose name, once loaded, is made
to resolve to 127.0.0.1 so that its scripts read the dashboard as "same origin". Their
requests still carry `Host: evil.example`, which is what is refused here, before any
route, cookie or token is looked at.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from fastapi.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("slotmap.admin")

ALWAYS_ALLOWED = ("localhost", "127.0.0.1", "::1")
# Distinct refused names logged once each, up to this many: a rebinding page that retries
# must not flood the log.
MAX_LOGGED_NAMES = 1000


def allowed_names(configured: Iterable[str], listen_host: str) -> frozenset[str]:
    """The configured names plus the listen address and the loopback names, normalised."""
    names = {*configured, *ALWAYS_ALLOWED}
    # A wildcard listen address is no name a browser sends.
    if listen_host not in ("0.0.0.0", "::", ""):
        names.add(listen_host)
    return frozenset(normal_name(name) for name in names)


def normal_name(name: str) -> str:
    return name.strip("[]").rstrip(".").lower()


def host_name(header: str) -> str:
    """The name in a Host header, without its port: `[::1]:8400` -> `::1`, `Example.COM.` -> `example.com`."""
    header = header.strip()
    if header.startswith("["):
        return normal_name(header.split("]", 1)[0])
    name, _, _port = header.partition(":") if header.count(":") == 1 else (header, "", "")
    return normal_name(name)


class HostCheck:
    """ASGI middleware: 400 for a Host header (or none) not in `allowed`; `*` in it turns the check off."""

    def __init__(self, app: ASGIApp, *, allowed: frozenset[str], headers: Mapping[str, str]) -> None:
        self.app = app
        self.allowed = allowed
        self.headers = dict(headers)
        self._logged: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or "*" in self.allowed:
            await self.app(scope, receive, send)
            return
        raw = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        name = host_name(raw)
        if name in self.allowed:
            await self.app(scope, receive, send)
            return
        if name not in self._logged and len(self._logged) < MAX_LOGGED_NAMES:
            self._logged.add(name)
            log.warning("refused requests for Host %r from %s: not one of the dashboard's names "
                        "(add it to [admin] allowed_hosts if it is one)", raw[:200],
                        (scope.get("client") or ("?",))[0])
        response = PlainTextResponse(
            f"unknown Host {raw[:200]!r}: this dashboard answers to {', '.join(sorted(self.allowed))} "
            "([admin] allowed_hosts)", status_code=400, headers=self.headers,
        )
        await response(scope, receive, send)
