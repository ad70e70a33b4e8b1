"""Cancel one job from the dashboard or the API: the queue server's CANCEL (a waiting job
removed, a running one dead "cancelled by <door>"), then an event naming the door."""
from __future__ import annotations

from admin_ui.errors import JobAlreadyFinished, JobNotFound
from admin_ui.jobs import ACTOR, DOOR_WORDS, Door
from admin_ui.queue_link import ask
from admin_ui.schemas import JobsActionResult
from admin_ui.settings import AdminSettings
from manager.storage.store import EventKind, NewEvent, Store
from queue_server.client.cancels import not_cancelled_text


def cancel_job(settings: AdminSettings, store: Store, queue: str, key: str, *, now: float, door: Door,
               client_host: str | None = None, actor: str = ACTOR) -> JobsActionResult:
    outcome = ask(settings, lambda client: client.cancel(queue, key), door=door)
    if outcome == "not_found":
        text, finished = not_cancelled_text(queue, key, ask(settings, lambda client: client.job(key), door=door))
        raise (JobAlreadyFinished if finished else JobNotFound)(text)
    message = f"cancel of {key} of {queue} ({outcome}) by {actor} {DOOR_WORDS[door]}"
    detail = {"key": key, "outcome": outcome, "door": door, "client_host": client_host}
    event_id = store.add_event(now, NewEvent(kind=EventKind.JOB_CANCELLED, message=message, queue=queue,
                                             actor=actor, detail=detail))
    return JobsActionResult(queue=queue, action="cancel", results={key: outcome}, count=1,
                            event_id=event_id, message=message)
