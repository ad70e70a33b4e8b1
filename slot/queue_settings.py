"""Per-queue settings in force when a handler class and the config both say something.

The rule (docs/CONFIG.md, "Handler class or config?"): a key written in the config's
`[queues.<q>]` table wins; a key left out takes the handler class's value. Only
`batch_size` exists on both sides today. The master logs every disagreement once at start.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from config.models import QueueConfig
from slot.handler import Handler

SHARED_KEYS = ("batch_size",)


@dataclass(frozen=True, slots=True)
class Conflict:
    queue: str
    key: str
    config_value: object
    handler_value: object
    handler: str

    def message(self) -> str:
        return (f"queue {self.queue}: {self.key} = {self.config_value!r} in the config wins over "
                f"{self.handler}.{self.key} = {self.handler_value!r} (the config's value is in force)")


# Where a setting in force came from: the queue's config table or the handler class.
Source = Literal["config", "handler"]


def batch_size_source(settings: QueueConfig | None) -> Source:
    """"config" when the queue's table writes batch_size, else "handler"."""
    return "config" if settings is not None and "batch_size" in settings.model_fields_set else "handler"


def batch_size_in_force(settings: QueueConfig | None, handler: type[Handler]) -> int:
    """The config's batch_size when written in the file, else the handler class's."""
    if settings is not None and batch_size_source(settings) == "config":
        return settings.batch_size
    return handler.batch_size


def conflicts(queues: Mapping[str, QueueConfig], handlers: Mapping[str, type[Handler]]) -> list[Conflict]:
    """Every queue where the config and its handler class give different values."""
    found: list[Conflict] = []
    for queue, handler in sorted(handlers.items()):
        settings = queues.get(queue)
        if settings is None:
            continue
        for key in SHARED_KEYS:
            if key not in settings.model_fields_set or key not in vars(handler):
                continue
            config_value, handler_value = getattr(settings, key), getattr(handler, key)
            if config_value != handler_value:
                found.append(Conflict(queue, key, config_value, handler_value,
                                      f"{handler.__module__}.{handler.__qualname__}"))
    return found
