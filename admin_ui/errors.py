"""Errors of the dashboard's actions; each carries the HTTP status the API answers with."""
from __future__ import annotations


class AdminError(Exception):
    status_code = 400


class UnknownQueue(AdminError):
    """No such queue in the config nor in the manager's samples."""

    status_code = 404


class InvalidLimits(AdminError):
    """min_slots would end up above max_slots."""

    status_code = 422


class DatabaseNotReady(AdminError):
    """The manager has not created its tables yet, or the database cannot be opened."""

    status_code = 503


class NotAuthenticated(AdminError):
    """The request carries no valid token (Bearer, HTTP basic password or login cookie).
    `why`: a key of LOGIN_REASONS, which the login page a GET is sent to explains."""

    status_code = 401

    def __init__(self, message: str, *, why: str = "") -> None:
        super().__init__(message)
        self.why = why


# What the login page says when a page sent its reader there. Fixed texts chosen by a key in
# the address, so a link from elsewhere cannot put words of its own on the login page.
LOGIN_REASONS = {
    "read": "This dashboard needs a token to read: the viewer's, the operator's or the admin's.",
    "job-data": "This page shows job data and errors (what producers and handlers put there): "
                "it needs the operator or admin token.",
}


class ActionsDisabled(AdminError):
    """No admin token is configured, so the dashboard is read-only for everyone."""

    status_code = 403


class QueueServerUnavailable(AdminError):
    """No queue server is configured, reachable, or online (jobs pages, jobs API, its metrics)."""

    status_code = 503


class QueueServerRefused(AdminError):
    """The queue server refused the request (a bad key, an unknown state)."""

    status_code = 400


class JobNotFound(AdminError):
    """No job with this key on the queue server (done, deleted, or never put)."""

    status_code = 404


class JobAlreadyFinished(AdminError):
    """A cancel of a job its queue keeps as done: nothing runs or waits to stop."""

    status_code = 409


class InvalidJobsAction(AdminError):
    """A retry/delete that names no job, or both keys and all, or deletes all but dead jobs."""

    status_code = 422


class InvalidTimeRange(AdminError):
    """A time filter whose start is after its end: it would quietly match nothing."""

    status_code = 422


class PulsarUnavailable(AdminError):
    """No pulsar is configured for the dashboard, or it did not take the request."""

    status_code = 503
