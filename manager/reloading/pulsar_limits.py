"""A config reload's rate limits, sent to the pulsar (slot/pulsar/): the pulsar holds the
limiters, so a reloaded `rate_limit` counts only once the pulsar has taken it.

Sent at once from the manager's loop with a short timeout: a reload is rare, and a pulsar
that does not answer costs the loop at most REPLY_TIMEOUT_S once. Not answered: the limits
stay as the pulsar has them, and the log and the event say so and how to apply them (SIGHUP
to the pulsar, which re-reads its own file).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from config.curve import client_curve
from config.models import ClusterConfig
from slot.pulsar.errors import PermitError

REPLY_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class LimitsSent:
    changes: list[str] = field(default_factory=list)  # the pulsar's lines: "mail: 10 per 1 s -> 20 per 1 s"
    error: str | None = None  # not applied, and why


def limits_changed(old: ClusterConfig, new: ClusterConfig) -> bool:
    from slot.pulsar.service import limits_of  # the service module loads ZeroMQ

    return limits_of(old.queues) != limits_of(new.queues)


def send_limits(config: ClusterConfig) -> LimitsSent:
    """Every queue's rate_limit of `config` to the pulsar at [pulsar] listen."""
    from slot.pulsar.client import PermitClient  # ZeroMQ's client only when a limit changed
    from slot.pulsar.service import limits_of

    client = PermitClient(config.pulsar.listen, curve=client_curve(config), reply_timeout_s=REPLY_TIMEOUT_S)
    try:
        return LimitsSent(changes=client.set_limits(limits_of(config.queues)))
    except PermitError as exc:
        return LimitsSent(error=f"{exc}; the pulsar keeps its limits until it is told: "
                                "`kill -HUP <pulsar pid>` makes it read its config file")
    finally:
        client.close()
