"""AsyncQueueClient against a real `slotmap queue-server` subprocess (each test runs its own loop)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from polling import DEADLINE_S

from queue_server.client.aio import AsyncQueueClient
from queue_server.protocol.client_errors import (
    AuthError,
    ConnectionLost,
    OfflineError,
    ReplyTimeout,
    ServerUnreachable,
)
from queue_server.protocol.replies import DoneResult, Job, QueueStats, Total
from tests.queue_server.server_proc import ServerProc, refused_address, running_queue_server

FAST = ("--fsync", "never")
RESULT_DEADLINE_S = DEADLINE_S  # tests/polling.py: sized for a busy shared machine
POLL_INTERVAL_S = 0.01


@pytest.fixture
def server(reused_queue_server) -> ServerProc:  # type: ignore[no-untyped-def]
    return reused_queue_server(*FAST)  # type: ignore[no-any-return]


async def poll_until_async(predicate: Callable[[], Awaitable[bool]], what: str) -> None:
    """Await `predicate()` until it is true; fail after RESULT_DEADLINE_S."""
    try:
        async with asyncio.timeout(RESULT_DEADLINE_S):
            while not await predicate():
                await asyncio.sleep(POLL_INTERVAL_S)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {RESULT_DEADLINE_S}s") from None


def test_put_get_done_round_trip(server: ServerProc) -> None:
    async def scenario() -> tuple[Job, list[DoneResult], Total]:
        async with AsyncQueueClient(server.address) as client:
            await client.put("q", "hello", priority=2, item="it")
            [job] = await client.get("q", expire_s=30)
            results = await client.done(job.id, 777_777)
            return job, results, await client.total()

    job, results, total = asyncio.run(scenario())
    assert (job.queue, job.priority, job.text, job.item) == ("q", 2, "hello", "it")
    assert results == [DoneResult(True, True, True), DoneResult(False)]
    assert total == Total(0, 0, 0, 0)


def test_batch_get_and_put_many_keep_order(server: ServerProc) -> None:
    async def scenario() -> tuple[int, list[bytes], list[Job]]:
        async with AsyncQueueClient(server.address) as client:
            stored = await client.put_many("bulk", [b"%04d" % n for n in range(2500)])
            batch = await client.get("bulk", count=3000)
            return stored, [job.data for job in batch], await client.get("bulk")

    stored, datas, rest = asyncio.run(scenario())
    assert stored == 2500
    assert datas == [b"%04d" % n for n in range(2500)]
    assert rest == []


def test_tasks_sharing_one_client_each_get_their_own_reply(server: ServerProc) -> None:
    async def scenario() -> list[str | None]:
        async with AsyncQueueClient(server.address) as client:
            results = await asyncio.gather(*(client.put_job("q", b"x", new_item=True) for _ in range(50)))
            return [result.item for result in results]

    items = asyncio.run(scenario())
    assert len(set(items)) == 50
    assert all(item is not None and item.startswith("_") for item in items)


def test_blocking_get_is_woken_by_a_put_from_another_client(server: ServerProc) -> None:
    async def scenario() -> list[Job]:
        async with AsyncQueueClient(server.address) as consumer, \
                AsyncQueueClient(server.address) as producer:
            waiting = asyncio.create_task(consumer.get("jobs", block=True))
            await producer.put("jobs", b"wake")
            async with asyncio.timeout(RESULT_DEADLINE_S):
                return await waiting

    [job] = asyncio.run(scenario())
    assert job.data == b"wake"


def test_cancelled_blocking_get_closes_its_connection_so_no_late_reply_is_misread(
    server: ServerProc,
) -> None:
    async def scenario() -> tuple[list[Job], Total]:
        async with AsyncQueueClient(server.address) as consumer, \
                AsyncQueueClient(server.address) as other:
            await consumer.ping()
            waiting = asyncio.create_task(consumer.get("jobs", block=True))
            await asyncio.sleep(0)  # one loop turn: the task sends GETB and awaits its reply
            assert not waiting.done()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert consumer.address is None
            await other.put("other", b"mine")
            return await consumer.get("other"), await consumer.total("other")

    jobs, total = asyncio.run(scenario())
    assert [(job.queue, job.data) for job in jobs] == [("other", b"mine")]
    assert total == Total(1, 0, 0, 1)


def test_call_returns_the_output_job_the_worker_puts_for_its_item(server: ServerProc) -> None:
    async def worker() -> None:
        async with AsyncQueueClient(server.address) as handler:
            [task] = await handler.get("requests", block=True)
            await handler.put("replies", task.data[::-1], item=task.item)
            await handler.done(task.id)

    async def scenario() -> Job:
        async with AsyncQueueClient(server.address) as caller:
            serving = asyncio.create_task(worker())
            reply = await caller.call("requests", b"abc", output_queue="replies",
                                      timeout_s=RESULT_DEADLINE_S)
            await serving
            await caller.done(reply.id)
            return reply

    reply = asyncio.run(scenario())
    assert (reply.queue, reply.data) == ("replies", b"cba")


def test_call_timeout_raises_reply_timeout_then_the_client_works_again(server: ServerProc) -> None:
    async def scenario() -> Total:
        async with AsyncQueueClient(server.address) as caller:
            with pytest.raises(ReplyTimeout):
                await caller.call("requests", b"x", output_queue="replies", timeout_s=0.2)
            await caller.ping()
            return await caller.total("requests")

    assert asyncio.run(scenario()).jobs == 1


def test_stats_report_the_counters_of_each_queue(server: ServerProc) -> None:
    async def scenario() -> tuple[dict[str, QueueStats], dict[str, QueueStats]]:
        async with AsyncQueueClient(server.address) as client:
            await client.put_many("a", [b"1", b"2"])
            await client.put("b", b"3", delay_s=60)
            [job] = await client.get("a")
            await client.later(job.id)
            return await client.stats(), await client.stats("b")

    everything, only_b = asyncio.run(scenario())
    assert set(everything) == {"a", "b"}
    assert (everything["a"].ready, everything["a"].put, everything["a"].later) == (2, 2, 1)
    assert list(only_b) == ["b"] and only_b["b"].delayed == 1


def test_offline_and_auth_errors_are_raised_as_their_classes(tmp_path: Path) -> None:
    async def scenario(address: str) -> None:
        async with AsyncQueueClient(address, token="tok") as admin:
            await admin.put("q", b"x")
        async with AsyncQueueClient(address) as anonymous:
            with pytest.raises(AuthError):
                await anonymous.total()
        reader, writer = await asyncio.open_connection(*address.split(":"))
        writer.write(b"AUTH tok\r\nOFFLINE\r\n")
        assert await reader.readline() == b"200 OK\r\n"
        assert await reader.readline() == b"200 OK Switched to Offline Mode\r\n"
        async with AsyncQueueClient(address, token="tok") as client:
            with pytest.raises(OfflineError):
                await client.get("q")
            assert (await client.total("q")).jobs == 1
        writer.close()

    with running_queue_server(tmp_path, *FAST, "--token", "tok") as secured:
        asyncio.run(scenario(secured.address))


def test_unreachable_server_raises_server_unreachable() -> None:
    async def scenario(address: str) -> None:
        async with AsyncQueueClient(address, reconnect_attempts=0) as client:
            await client.put("q", b"x")

    with refused_address() as address, pytest.raises(ServerUnreachable, match=address):
        asyncio.run(scenario(address))


def test_client_fails_over_to_the_second_server_when_the_first_is_killed(tmp_path: Path) -> None:
    async def scenario(first: ServerProc, second: ServerProc) -> tuple[object, object, Total]:
        async with AsyncQueueClient([first.address, second.address]) as ha:
            await ha.put("q", b"one")
            before = ha.address
            first.kill()
            await ha.put("q", b"two")
            return before, ha.address, await ha.total("q")

    with running_queue_server(tmp_path, *FAST) as first, \
            running_queue_server(tmp_path, *FAST) as second:
        before, after, total = asyncio.run(scenario(first, second))
    assert before == ("127.0.0.1", first.port)
    assert after == ("127.0.0.1", second.port)
    assert total.jobs == 1


def test_server_killed_under_a_blocked_get_raises_connection_lost(tmp_path: Path) -> None:
    async def scenario(first: ServerProc, second: ServerProc) -> object:
        async with AsyncQueueClient([first.address, second.address]) as ha, \
                AsyncQueueClient(first.address) as observer:
            waiting = asyncio.create_task(
                ha.call("requests", b"x", output_queue="replies")
            )
            await poll_until_async(
                lambda: _has_jobs(observer, "requests"), "PUT ... WAIT stored"
            )
            first.kill()
            with pytest.raises(ConnectionLost):
                await waiting
            await ha.ping()
            return ha.address

    with running_queue_server(tmp_path, *FAST, "--server-id", "1") as first, \
            running_queue_server(tmp_path, *FAST, "--server-id", "2") as second:
        assert asyncio.run(scenario(first, second)) == ("127.0.0.1", second.port)


async def _has_jobs(client: AsyncQueueClient, queue: str) -> bool:
    return (await client.total(queue)).jobs > 0
