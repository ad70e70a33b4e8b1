"""create_app(engine, settings): the dashboard's FastAPI application (routes live in pages.py and api.py)."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.engine import Engine

from admin_ui import api, pages
from admin_ui.auth import REALM, access_of
from admin_ui.errors import AdminError, NotAuthenticated
from admin_ui.format import fmt
from admin_ui.metrics import make_registry
from admin_ui.settings import AdminSettings

HERE = Path(__file__).resolve().parent
SWAGGER = "/static/vendor/swagger-ui"
DESCRIPTION = (
    "Read the manager's view of the cluster: queues (slots, load, jobs), the slot map of hosts "
    "x queues, hosts' memory, and the manager's events. Actions (pause, resume, min/max slots) "
    "need the admin token as `Authorization: Bearer <token>` or as the HTTP basic password."
)


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.filters["fmt"] = fmt
    templates.env.globals["quote"] = quote
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
        return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
    settings: AdminSettings = request.app.state.settings
    response: Response = request.app.state.templates.TemplateResponse(
        request, "message.html",
        {"access": access_of(request, settings), "refresh_ms": 0, "now": settings.clock(),
         "nav": "", "title": type(exc).__name__, "message": str(exc)},
        status_code=exc.status_code,
    )
    return response


def create_app(engine: Engine, settings: AdminSettings) -> FastAPI:
    app = FastAPI(title="Slotmap admin", version="1", description=DESCRIPTION,
                  docs_url=None, redoc_url=None)
    app.state.engine = engine
    app.state.settings = settings
    app.state.templates = make_templates()
    app.state.registry = make_registry(engine, forget_after_s=settings.forget_after_s,
                                       clock=settings.clock)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(api.router)
    app.include_router(pages.public)
    app.include_router(pages.router)
    app.add_exception_handler(AdminError, handle_admin_error)
    app.add_api_route("/docs", api_docs, methods=["GET"], include_in_schema=False)
    return app


def api_docs() -> HTMLResponse:
    """Swagger UI from admin_ui/static/vendor (no CDN: the dashboard may run offline)."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json", title="Slotmap admin API",
        swagger_js_url=f"{SWAGGER}/swagger-ui-bundle.js", swagger_css_url=f"{SWAGGER}/swagger-ui.css",
        swagger_favicon_url="/static/favicon.svg",
    )
