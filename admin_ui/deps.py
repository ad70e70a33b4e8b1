"""FastAPI dependencies shared by the page and API routes: settings, access, the manager's store once its tables exist."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated
from urllib.parse import parse_qs, urlsplit

from fastapi import Depends, Query, Request

from admin_ui.auth import Access, access_of, require_act, require_read
from admin_ui.errors import DatabaseNotReady, NotAuthenticated
from admin_ui.settings import AdminSettings
from manager.storage.store import Store
from manager.storage.store_reads import DatabaseUnreadable, StoreReads, reading

MAX_FORM_BYTES = 16 * 1024


def get_settings(request: Request) -> AdminSettings:
    settings: AdminSettings = request.app.state.settings
    return settings


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_access(request: Request, settings: Annotated[AdminSettings, Depends(get_settings)]) -> Access:
    return access_of(request, settings)


def readable(access: Annotated[Access, Depends(get_access)]) -> Access:
    require_read(access)
    return access


def actor(request: Request, access: Annotated[Access, Depends(get_access)]) -> Access:
    same_site(request)
    require_act(access)
    return access


def get_reads(store: Annotated[Store, Depends(get_store)]) -> Iterator[StoreReads]:
    """A read of a database where the manager's tables exist (else 503 with the reason)."""
    with reading(store) as reads:
        try:
            missing = reads.missing_tables()
        except DatabaseUnreadable as exc:
            raise DatabaseNotReady(f"cannot open the database {store.database}: {exc}") from exc
        if missing:
            raise DatabaseNotReady(
                f"no data yet: the manager has not created {', '.join(missing)} in {store.database}"
            )
        yield reads


def ready_store(store: Annotated[Store, Depends(get_store)], _: Annotated[StoreReads, Depends(get_reads)]) -> Store:
    """The store to write an admin's action to, once its tables exist (else 503 like a read)."""
    return store


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


ReadsDep = Annotated[StoreReads, Depends(get_reads)]
StoreDep = Annotated[Store, Depends(ready_store)]
SettingsDep = Annotated[AdminSettings, Depends(get_settings)]
ReadableDep = Annotated[Access, Depends(readable)]
ActorDep = Annotated[Access, Depends(actor)]
AccessDep = Annotated[Access, Depends(get_access)]
FormDep = Annotated[dict[str, str], Depends(form_fields)]
# An event id as SQL stores it (a signed 64-bit integer): a larger `before_id` was an
# OverflowError out of the database driver, a 500, not a 422.
EventId = Annotated[int, Query(ge=1, le=2**63 - 1)]
# A time filter: `nan` or `1e400` (inf) matched nothing and answered an empty list, not a 422.
UnixTime = Annotated[float, Query(allow_inf_nan=False)]
