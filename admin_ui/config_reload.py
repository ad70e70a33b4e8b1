"""POST /api/config/reload: the admin token asks the active manager to reload its config file
(manager/reloading/reload_requests.py: a row it takes within a second, as SIGHUP). The answer, applied
or refused and why, is the manager's `config_reloaded` / `config_reload_refused` event."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from admin_ui.auth import ADMIN, Access
from admin_ui.deps import ActorDep, SettingsDep, readable, ready_store
from admin_ui.errors import ActionsDisabled
from admin_ui.schemas import ConfigReloadAsked
from manager.reloading.reload_requests import request_reload
from manager.storage.store import Store

api = APIRouter(dependencies=[Depends(readable)])


def admin_only(access: ActorDep) -> Access:
    if access.role != ADMIN:
        raise ActionsDisabled(f"signed in as {access.role}: a config reload needs the admin token")
    return access


@api.post("/api/config/reload", tags=["config"])
def reload_config(settings: SettingsDep, store: Annotated[Store, Depends(ready_store)],
                  _: Annotated[Access, Depends(admin_only)]) -> ConfigReloadAsked:
    """The active manager re-reads its config file within about a second; a bad file changes
    nothing. Its event on /api/events says what changed, or why nothing did."""
    request_id = request_reload(store.engine, door="api", now_unix=settings.clock())
    return ConfigReloadAsked(request_id=request_id, message="config reload asked: the manager takes it "
                             "within about a second; its config_reloaded or config_reload_refused event says the result")

