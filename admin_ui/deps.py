"""FastAPI dependencies shared by the page and API routes: settings, access, a ready database session."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated
from urllib.parse import parse_qs, urlsplit

from fastapi import Depends, Request
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from admin_ui import views
from admin_ui.auth import Access, access_of, require_act, require_read
from admin_ui.errors import DatabaseNotReady, NotAuthenticated
from admin_ui.settings import AdminSettings

MAX_FORM_BYTES = 16 * 1024


def get_settings(request: Request) -> AdminSettings:
    settings: AdminSettings = request.app.state.settings
    return settings


def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def get_access(request: Request, settings: Annotated[AdminSettings, Depends(get_settings)]) -> Access:
    return access_of(request, settings)


def readable(access: Annotated[Access, Depends(get_access)]) -> Access:
    require_read(access)
    return access


def actor(request: Request, access: Annotated[Access, Depends(get_access)]) -> Access:
    same_site(request)
    require_act(access)
    return access


def get_session(engine: Annotated[Engine, Depends(get_engine)]) -> Iterator[Session]:
    """A session on a database where the manager's tables exist (else 503 with the reason)."""
    with Session(engine) as session:
        try:
            missing = views.missing_tables(session)
        except OperationalError as exc:
            raise DatabaseNotReady(f"cannot open the database {engine.url!r}: {exc.orig}") from exc
        if missing:
            raise DatabaseNotReady(
                f"no data yet: the manager has not created {', '.join(missing)} in {engine.url!r}"
            )
        yield session


def cross_site(request: Request) -> str | None:
    """Why a state change comes from another site (None when it does not).

    Browsers send HTTP basic credentials and cookies cross-site too. `Origin: null` is what
    a sandboxed iframe, a data: or file: page sends: no site of ours, so it is refused.
    """
    if request.headers.get("sec-fetch-site") == "cross-site":
        return "form posted from another site"
    origin = request.headers.get("origin")
    if origin is None:
        return None
    if origin == "null":
        return "form posted from an opaque origin (Origin: null)"
    if urlsplit(origin).netloc != request.headers.get("host"):
        return f"form posted from {origin}"
    return None


def same_site(request: Request) -> None:
    reason = cross_site(request)
    if reason is not None:
        raise NotAuthenticated(reason)


async def form_fields(request: Request) -> dict[str, str]:
    """An application/x-www-form-urlencoded body (first value of each field)."""
    same_site(request)
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return {}
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[AdminSettings, Depends(get_settings)]
ReadableDep = Annotated[Access, Depends(readable)]
ActorDep = Annotated[Access, Depends(actor)]
AccessDep = Annotated[Access, Depends(get_access)]
FormDep = Annotated[dict[str, str], Depends(form_fields)]
