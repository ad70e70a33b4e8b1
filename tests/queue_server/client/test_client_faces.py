"""The blocking and the asyncio client are two faces of one API (issue 11): the same public
methods with the same parameters, every asyncio one a coroutine function."""
from __future__ import annotations

import inspect

from queue_server.client import AsyncQueueClient, QueueClient

# A blocking get can also be woken by a file descriptor; an asyncio task is cancelled instead.
# Both check the waited-on server alike (check_s, queue_server/client/wait_check.py).
SYNC_ONLY_PARAMETERS = {"get": {"wake_fd"}}
# Both faces are context managers, each its own kind.
CONTEXT_MANAGERS = {QueueClient: {"__enter__", "__exit__"}, AsyncQueueClient: {"__aenter__", "__aexit__"}}


def public_methods(cls: type) -> set[str]:
    return {name for name, value in inspect.getmembers(cls)
            if not name.startswith("_") and callable(value)}


def test_both_clients_have_the_same_public_methods() -> None:
    assert public_methods(QueueClient) == public_methods(AsyncQueueClient)
    assert {"fail_many", "put_many", "call", "get", "close"} <= public_methods(QueueClient)


def test_both_clients_have_the_same_public_attributes() -> None:
    def attributes(cls: type) -> set[str]:
        return {name for name in dir(cls) if not name.startswith("_")} - public_methods(cls)

    assert attributes(QueueClient) == attributes(AsyncQueueClient)
    for cls, dunders in CONTEXT_MANAGERS.items():
        assert dunders <= set(dir(cls))


def test_every_asyncio_method_is_a_coroutine_with_the_parameters_of_the_blocking_one() -> None:
    for name in public_methods(QueueClient):
        blocking, awaiting = getattr(QueueClient, name), getattr(AsyncQueueClient, name)
        assert inspect.iscoroutinefunction(awaiting), name
        assert not inspect.iscoroutinefunction(blocking), name
        sync_params = inspect.signature(blocking).parameters
        async_params = inspect.signature(awaiting).parameters
        expected = [p for p in sync_params if p not in SYNC_ONLY_PARAMETERS.get(name, set())]
        assert list(async_params) == expected, name
        for param in expected:
            assert async_params[param].default == sync_params[param].default, (name, param)
            assert async_params[param].kind == sync_params[param].kind, (name, param)
