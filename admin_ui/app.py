"""create_app(store, settings): the dashboard's FastAPI application (routes live in pages.py and api.py).

Every request, whatever its route, goes through `guard`: state changes from another site
are refused, wrong tokens are slowed down per client, and every response carries the
headers that keep the pages out of frames and stop content sniffing.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

import jinja2
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from admin_ui import api, config_reload, pages, schedules, views
from admin_ui.auth import (
    REALM,
    SESSION_COOKIE,
    Failures,
    LoginThrottle,
    access_of,
    check_settings,
    request_role,
)
from admin_ui.deps import cross_site
from admin_ui.errors import LOGIN_REASONS, AdminError, NotAuthenticated
from admin_ui.format import fmt, json_text, path_segment
from admin_ui.host_check import HostCheck
from admin_ui.metrics import make_registry
from admin_ui.settings import AdminSettings
from admin_ui.validation_errors import handle_validation_error
from manager.storage.store import Store

log = logging.getLogger("slotmap.admin")

HERE = Path(__file__).resolve().parent
# Clickjacking (no page of ours in a frame, old and new browsers) and MIME sniffing; and a
# second line behind the templates' escaping: our pages run only our own script file (no
# inline script, no other origin), so markup that slipped through could not run a script.
STRICT_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
              "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# /docs is Swagger UI, which starts itself with an inline script.
DOCS_CSP = "frame-ancestors 'none'"
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Forms are read up to 16 KiB (deps.MAX_FORM_BYTES) and the API's JSON bodies are a few
# hundred bytes: a request body past this is refused before the application buffers it.
MAX_BODY_BYTES = 64 * 1024


class BodyLimit:
    """ASGI middleware: a body announced over `max_bytes` gets 413 before a byte of it is read;
    a chunked one that grows past it is cut (the application sees a disconnect)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            log.warning("refused a %s-byte body to %s %s from %s (limit %d)", length.decode(errors="replace"),
                        scope["method"], scope["path"], (scope.get("client") or ("?",))[0], self.max_bytes)
            await PlainTextResponse(f"request body over {self.max_bytes} bytes", status_code=413,
                                    headers={**SECURITY_HEADERS, "Connection": "close"})(scope, receive, send)
            return
        taken = 0

        async def bounded() -> Message:
            nonlocal taken
            message = await receive()
            if message["type"] == "http.request":
                taken += len(message.get("body", b""))
                if taken > self.max_bytes:
                    log.warning("cut a chunked body past %d bytes to %s %s", self.max_bytes,
                                scope["method"], scope["path"])
                    return {"type": "http.disconnect"}
            return message

        await self.app(scope, bounded, send)
SWAGGER = "/static/vendor/swagger-ui"
DESCRIPTION = (
    "Read the manager's view of the cluster: queues (slots, load, jobs), the slot map of hosts "
    "x queues, hosts' memory, and the manager's events. Actions (pause, resume, min/max slots) "
    "need the admin token as `Authorization: Bearer <token>` or as the HTTP basic password."
)


def make_templates() -> Jinja2Templates:
    # Autoescape for every template whatever its name (starlette's default covers .html
    # only): a peer's host or queue name, an event's text, a job's data are all escaped.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    templates = Jinja2Templates(env=env)
    templates.env.filters["fmt"] = fmt
    templates.env.filters["json_text"] = json_text
    templates.env.filters["segment"] = path_segment
    templates.env.globals["quote"] = quote
    templates.env.globals["jobs_state_of_kind"] = views.JOBS_STATE_OF_KIND
    return templates


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path == "/metrics"


def handle_admin_error(request: Request, exc: Exception) -> Response:
    """JSON for the API; for pages a login redirect or a short message page."""
    assert isinstance(exc, AdminError)
    if _wants_json(request):
        headers = {"WWW-Authenticate": f'Basic realm="{REALM}"'} if isinstance(exc, NotAuthenticated) else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)
    if isinstance(exc, NotAuthenticated) and request.method == "GET":
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        why = f"&why={exc.why}" if exc.why in LOGIN_REASONS else ""
        return RedirectResponse(f"/login?next={quote(target)}{why}", status_code=303)
    settings: AdminSettings = request.app.state.settings
    response: Response = request.app.state.templates.TemplateResponse(
        request, "message.html",
        {"access": access_of(request, settings), "refresh_ms": 0, "now": settings.clock(),
         "nav": "", "title": type(exc).__name__, "message": str(exc)},
        status_code=exc.status_code,
    )
    return response


def _token_tried(request: Request, settings: AdminSettings) -> tuple[str, bool] | None:
    """The credential a request presents and whether it is right (None: none to check).

    A wrong Bearer, basic password or session cookie counts even on a page anyone may
    read: the page would show its action forms only to the right token, so reads could
    be used to guess (the cookie is derived from the token, so a cookie is a guess of
    it). A login form's answer is known only from its status (see `_guarded`).
    """
    if "authorization" in request.headers:
        scheme = request.headers["authorization"].partition(" ")[0].lower()
        return ((scheme if scheme in ("bearer", "basic") else "authorization"),
                request_role(request, settings) is not None)
    # A login form decides for itself, even sent with a stale cookie (see `_guarded`).
    if SESSION_COOKIE in request.cookies and not _is_login(request):
        return "session cookie", request_role(request, settings) is not None
    return None


def _is_login(request: Request) -> bool:
    return request.method == "POST" and request.url.path == "/login"


async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    response = await _guarded(request, call_next)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers.setdefault("Content-Security-Policy",
                                DOCS_CSP if request.url.path == "/docs" else STRICT_CSP)
    if not request.url.path.startswith("/static/"):
        # Kept in the browser's cache, a page came back on Back as it was: jobs already
        # deleted still listed (their boxes ticked), and a job's data shown again after
        # Log out. Uncached, Back asks anew: the list as it is now, or the login form.
        response.headers.setdefault("Cache-Control", "no-store")
    return response


async def _guarded(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    if request.method in UNSAFE_METHODS:
        reason = cross_site(request)
        if reason is not None:
            log.warning("refused %s %s from %s: %s", request.method, request.url.path,
                        _client(request), reason)
            return handle_admin_error(request, NotAuthenticated(reason))
    settings = request.app.state.settings
    configured = settings.token is not None or bool(settings.role_tokens)
    tried = _token_tried(request, settings) if configured else None
    if not configured or (tried is None and not _is_login(request)):
        return await call_next(request)
    throttle: LoginThrottle = request.app.state.login_throttle
    client = _client(request)
    wait_s = throttle.wait_s(client, time.monotonic())
    if wait_s > 0:
        refused = handle_admin_error(
            request, TooManyAttempts(f"too many wrong tokens from {client}: try again in {wait_s:.0f} s"),
        )
        refused.headers["Retry-After"] = str(max(1, round(wait_s)))
        return refused
    # A failure is counted before the request runs, not after it is answered: counted
    # after, a burst of guesses sent at once from one client all passed the check above
    # before the first was counted (30 concurrent guesses: 30 checked, not 4).
    if tried is None:
        # A login form's answer is known only from its status: counted as a failure
        # now, forgiven below if it logs in.
        record = throttle.failed(client, time.monotonic())
        response = await call_next(request)
        if response.status_code < 400:
            throttle.succeeded(client)
            return response
        _log_wrong(request, client, "login form", record)
        return response
    kind, right = tried
    if right:
        # A session cookie is presented by every page and refresh of a logged-in browser:
        # were it to wipe its address's failures, guesses from a shared address (a NAT,
        # this machine) would start over at each refresh. A login does.
        if kind != "session cookie":
            throttle.succeeded(client)
        return await call_next(request)
    _log_wrong(request, client, kind, throttle.failed(client, time.monotonic()))
    response = await call_next(request)
    if kind == "session cookie":
        # A cookie left from an older token would otherwise count again at every request
        # (and lock its own browser out of the login form).
        response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _log_wrong(request: Request, client: str, kind: str, record: Failures) -> None:
    # Never the token tried: a typo of the real one would be most of the secret.
    log.warning("wrong admin token from %s (%s, %s %s): %d in a row; next try allowed in %.0f s",
                client, kind, request.method, request.url.path, record.count,
                record.blocked_until - record.last_at)


class TooManyAttempts(AdminError):
    """Wrong tokens from this client came too fast: its next try waits (LoginThrottle)."""

    status_code = 429


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "an unknown client"


def create_app(store: Store, settings: AdminSettings) -> FastAPI:
    check_settings(settings.token, protect_reads=settings.protect_reads)
    app = FastAPI(title="Slotmap admin", version="1", description=DESCRIPTION,
                  docs_url=None, redoc_url=None)
    app.state.store = store
    app.state.settings = settings
    app.state.templates = make_templates()
    app.state.login_throttle = LoginThrottle()
    app.middleware("http")(guard)
    # Nothing below it buffers a body first.
    app.add_middleware(BodyLimit)
    # Outermost: a request for another site's name (DNS rebinding) gets nothing else.
    app.add_middleware(HostCheck, allowed=settings.allowed_hosts, headers=SECURITY_HEADERS)
    app.state.registry = make_registry(store, forget_after_s=settings.forget_after_s,
                                       clock=settings.clock)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(api.router)
    app.include_router(pages.public)
    app.include_router(pages.router)
    app.include_router(schedules.api)
    app.include_router(config_reload.api)
    app.include_router(schedules.pages)
    app.add_exception_handler(AdminError, handle_admin_error)
    app.add_exception_handler(RequestValidationError, handle_validation_error)
    app.add_api_route("/docs", api_docs, methods=["GET"], include_in_schema=False)
    return app


def api_docs() -> HTMLResponse:
    """Swagger UI from admin_ui/static/vendor (no CDN: the dashboard may run offline)."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json", title="Slotmap admin API",
        swagger_js_url=f"{SWAGGER}/swagger-ui-bundle.js", swagger_css_url=f"{SWAGGER}/swagger-ui.css",
        swagger_favicon_url="/static/favicon.svg",
    )
