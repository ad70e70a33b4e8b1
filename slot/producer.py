"""Follow-up jobs: a handler puts jobs through its slot's own queue-server connection.

The slot process installs its client here once (slot/process.py); `Handler.put` and
`Handler.put_many` use it between the batch's fetch and its acknowledgements, on the
handler's thread (the client is not shared across threads). Outside a slot (a unit test
of a handler) `install` can be given any QueueClient.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from slot.errors import ProducerNotInstalled

if TYPE_CHECKING:
    from queue_server.client import QueueClient

_client: QueueClient | None = None


def install(client: QueueClient | None) -> None:
    global _client
    _client = client


def put(queue: str, data: bytes | str, *, priority: int = 0, key: str | None = None,
        delay_s: float | None = None, ttl_s: float | None = None) -> str:
    """Put one job; its key (the server's, or `key`: a key a waiting or running job holds adds
    nothing, so a parent that runs again puts no second child)."""
    return _installed().put(queue, data, priority=priority, key=key, delay_s=delay_s, ttl_s=ttl_s)


def put_many(queue: str, datas: Iterable[bytes | str], *, priority: int = 0,
             keys: Sequence[str] | None = None) -> int:
    """Put every job (pipelined without keys, one by one with them); how many were taken."""
    client = _installed()
    if keys is None:
        return client.put_many(queue, datas, priority=priority)
    batch = list(datas)
    if len(batch) != len(keys):
        raise ValueError(f"put_many: {len(batch)} jobs but {len(keys)} keys")
    for data, key in zip(batch, keys, strict=True):
        client.put(queue, data, priority=priority, key=key)
    return len(batch)


def _installed() -> QueueClient:
    if _client is None:
        raise ProducerNotInstalled("follow-up jobs are put from a handler running in a slot "
                           "(slot.producer.install(client) outside one)")
    return _client
