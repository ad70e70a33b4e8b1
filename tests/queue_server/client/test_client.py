"""QueueClient against a real `slotmap queue-server` subprocess."""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from polling import DEADLINE_S

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import (
    AuthError,
    ConnectionLost,
    OfflineError,
    QueueServerError,
    ReplyTimeout,
    ServerUnreachable,
)
from queue_server.protocol.replies import DoneResult, Job, Total
from tests.queue_server.server_proc import (
    ServerProc,
    raw_command,
    refused_address,
    running_queue_server,
    start_queue_server,
)
from tests.queue_server.util import poll_until

FAST = ("--fsync", "never")
RESULT_DEADLINE_S = DEADLINE_S  # tests/polling.py: sized for a busy shared machine


@pytest.fixture
def server(reused_queue_server) -> ServerProc:  # type: ignore[no-untyped-def]
    return reused_queue_server(*FAST)  # type: ignore[no-any-return]


@pytest.fixture
def client(server: ServerProc) -> Iterator[QueueClient]:
    with QueueClient(server.address, timeout_s=5.0) as queue_client:
        yield queue_client


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


def test_put_then_get_hands_out_the_job_with_its_data_priority_and_a_running_id(client: QueueClient) -> None:
    key = client.put("q", b"hello", priority=7)
    assert key.startswith("_") and key[1:].isdigit()
    [job] = client.get("q")
    assert (job.queue, job.priority, job.data, job.item) == ("q", 7, b"hello", None)
    assert job.id > 0
    assert client.total("q") == Total(1, 0, 0, 1)


def test_get_on_an_empty_queue_returns_an_empty_list(client: QueueClient) -> None:
    assert client.get("nothing_here") == []
    assert client.get() == []


def test_higher_priority_is_served_first_and_fifo_inside_a_priority(client: QueueClient) -> None:
    for data, priority in [(b"low1", 0), (b"high", 5), (b"low2", 0), (b"neg", -1)]:
        client.put("q", data, priority=priority)
    jobs = client.get("q", count=10)
    assert [job.data for job in jobs] == [b"high", b"low1", b"low2", b"neg"]


def test_new_item_returns_the_name_the_server_made_and_the_job_carries_it(client: QueueClient) -> None:
    item = client.put_job("q", "x", new_item=True).item
    assert item is not None and item.startswith("_") and item[1:].isdigit()
    [job] = client.get("q")
    assert job.item == item
    client.put("q", "y", item="mine")
    assert client.get("q")[0].item == "mine"


def test_get_with_count_returns_at_most_count_jobs(client: QueueClient) -> None:
    client.put_many("q", [b"1", b"2", b"3"])
    assert [job.data for job in client.get("q", count=2)] == [b"1", b"2"]
    assert [job.data for job in client.get("q", count=5)] == [b"3"]
    assert client.get("q", count=5) == []


def test_done_answers_every_id_of_one_request_with_finq_and_fini(client: QueueClient) -> None:
    client.put("q", b"a", item="it")
    client.put("q", b"b", item="it")
    first, second = client.get("q", count=2)
    results = client.done(first.id, 999_999, second.id)
    assert results == [
        DoneResult(found=True, queue_finished=False, item_finished=False),
        DoneResult(found=False),
        DoneResult(found=True, queue_finished=True, item_finished=True),
    ]


def test_later_puts_the_job_back_and_reports_ids_that_were_not_running(client: QueueClient) -> None:
    client.put("q", b"again")
    [job] = client.get("q")
    assert client.later(job.id, 424_242) == [True, False]
    [again] = client.get("q")
    assert again.data == b"again"
    assert again.id != job.id


def test_later_with_delay_keeps_the_job_invisible_until_it_is_due(client: QueueClient) -> None:
    client.put("q", b"soon")
    [job] = client.get("q")
    assert client.later(job.id, delay_s=60) == [True]
    assert client.get("q") == []
    assert client.stats("q")["q"].delayed == 1


def test_delayed_put_becomes_ready_after_its_delay(client: QueueClient) -> None:
    client.put("q", b"later", delay_s=1.5)  # past the two requests below on a busy machine
    assert client.get("q") == []
    assert client.total("q").jobs == 1
    jobs = poll_until(lambda: client.get("q"), RESULT_DEADLINE_S, what="delayed job ready")
    assert jobs[0].data == b"later"


def test_expire_then_done_deletes_a_job_that_runs_out_of_time(client: QueueClient) -> None:
    client.put("q", b"short")
    client.get("q", expire_s=0.1, then="done")
    poll_until(lambda: client.total("q") == Total(0, 0, 0, 0), RESULT_DEADLINE_S,
               what="expired job deleted")
    assert client.stats("q")["q"].expired == 1


def test_blocking_get_returns_the_job_another_client_puts(server: ServerProc, client: QueueClient, pool: ThreadPoolExecutor) -> None:
    waiting = pool.submit(client.get, "jobs", block=True)
    with QueueClient(server.address) as producer:
        producer.put("jobs", b"wake up")
    [job] = waiting.result(timeout=RESULT_DEADLINE_S)
    assert job.data == b"wake up"


def test_get_until_empty_returns_nothing_once_no_job_of_the_queue_runs(server: ServerProc, client: QueueClient, pool: ThreadPoolExecutor) -> None:
    client.put("q", b"only")
    [job] = client.get("q")
    with QueueClient(server.address) as watcher:
        waiting = pool.submit(watcher.get, "q", block="until_empty")
        client.done(job.id)
        assert waiting.result(timeout=RESULT_DEADLINE_S) == []


def test_call_returns_the_output_job_of_its_item(server: ServerProc, client: QueueClient, pool: ThreadPoolExecutor) -> None:
    def worker() -> Job:
        with QueueClient(server.address) as handler:
            [task] = handler.get("requests", block=True)
            handler.put("replies", task.data.upper(), item=task.item)
            handler.done(task.id)
            return task

    task = pool.submit(worker)
    reply = client.call("requests", b"ping", output_queue="replies", expire_s=30, then="done")
    assert reply.data == b"PING"
    assert (reply.queue, reply.item) == ("replies", task.result(timeout=RESULT_DEADLINE_S).item)
    assert client.done(reply.id) == [DoneResult(True, True, True)]


def test_call_without_an_answer_times_out_and_the_next_request_reconnects(client: QueueClient) -> None:
    with pytest.raises(ReplyTimeout):
        client.call("requests", b"nobody listens", output_queue="replies", timeout_s=0.2)
    client.ping()
    assert client.total("requests").jobs == 1


def test_stats_count_ready_running_and_the_counters_since_start(client: QueueClient) -> None:
    client.put_many("q", [b"a", b"b", b"c"])
    client.put("q", b"d", priority=3, delay_s=60)
    [job] = client.get("q")
    client.done(job.id)
    [running] = client.get("q")
    stats = client.stats()["q"]
    assert (stats.ready, stats.delayed, stats.running) == (1, 1, 1)
    assert (stats.put, stats.done, stats.later, stats.expired) == (4, 1, 0, 0)
    assert stats.by_priority == {0: 1, 3: 1}
    assert running.data == b"b"
    assert client.total() == Total(queues=1, priorities=2, jobs=2, running=1)


def test_put_many_stores_every_job_in_order(client: QueueClient) -> None:
    datas = [b"%05d" % n for n in range(5000)]
    assert client.put_many("bulk", datas, priority=1) == 5000
    assert client.total("bulk") == Total(1, 1, 5000, 0)
    jobs = client.get("bulk", count=5000)
    assert [job.data for job in jobs] == datas


def test_runlist_shows_running_jobs_with_their_data(client: QueueClient) -> None:
    client.put("q", b"busy")
    [job] = client.get("q", expire_s=60)
    [entry] = client.runlist(with_data=True)
    assert (entry.id, entry.queue, entry.data) == (job.id, "q", b"busy")
    assert entry.expires_at is not None


def test_offline_server_refuses_with_offline_error_and_the_connection_stays_usable(server: ServerProc, client: QueueClient) -> None:
    assert raw_command(server, b"OFFLINE") == b"200 OK Switched to Offline Mode"
    with pytest.raises(OfflineError):
        client.put("q", b"x")
    with pytest.raises(OfflineError):
        client.done(1, 2, 3)
    assert client.total() == Total(0, 0, 0, 0)
    assert raw_command(server, b"ONLINE") == b"200 OK Switched to Online Mode"
    client.put("q", b"x")
    assert client.total("q").jobs == 1


def test_a_job_over_the_size_limit_gets_413_and_the_client_reconnects(client: QueueClient) -> None:
    with pytest.raises(QueueServerError) as caught:
        client.put("q", b"x" * (1024 * 1024 + 1))
    assert caught.value.code == 413
    client.put("q", b"small")
    assert client.total("q").jobs == 1


def test_a_token_is_sent_after_connecting_and_a_wrong_one_is_an_auth_error(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST, "--token", "s3cret") as secured:
        with QueueClient(secured.address, token="s3cret") as good:
            good.put("q", b"x")
            assert good.total("q").jobs == 1
        with QueueClient(secured.address, token="wrong") as bad, pytest.raises(AuthError):
            bad.ping()
        with QueueClient(secured.address) as anonymous, pytest.raises(AuthError) as caught:
            anonymous.put("q", b"x")
        assert caught.value.code == 401


def test_unreachable_server_raises_server_unreachable_naming_the_address() -> None:
    with refused_address() as address, QueueClient(address, reconnect_attempts=1) as lonely, \
            pytest.raises(ServerUnreachable, match=address):
        lonely.ping()
    assert issubclass(ServerUnreachable, ConnectionLost)


def test_client_reconnects_transparently_after_its_server_restarts(tmp_path: Path) -> None:
    first = start_queue_server(tmp_path, *FAST)
    try:
        with QueueClient(first.address) as steady:
            steady.put("q", b"before")
            first.kill()
            restarted = start_queue_server(tmp_path, *FAST, data_dir=first.data_dir,
                                           port=first.port)
            try:
                steady.put("q", b"after")
                assert steady.total("q").jobs == 2
            finally:
                restarted.kill()
    finally:
        first.kill()


def test_client_fails_over_to_the_next_server_when_the_first_is_killed(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST) as first, \
            running_queue_server(tmp_path, *FAST) as second:
        with QueueClient([first.address, second.address]) as ha:
            ha.put("q", b"one")
            assert ha.address == ("127.0.0.1", first.port)
            first.kill()
            ha.put("q", b"two")
            assert ha.address == ("127.0.0.1", second.port)
        assert raw_command(second, b"TOTAL q") == b"200 OK 1 1 1 0"


def test_client_uses_the_server_with_the_lowest_id_whatever_the_list_order(tmp_path: Path) -> None:
    with running_queue_server(tmp_path, *FAST, "--server-id", "2") as two, \
            running_queue_server(tmp_path, *FAST, "--server-id", "1") as one:
        with QueueClient([two.address, one.address]) as ha:
            ha.put("q", b"x")
            assert (ha.address, ha.server_id) == (("127.0.0.1", one.port), 1)
        assert raw_command(one, b"TOTAL q") == b"200 OK 1 1 1 0"
        assert raw_command(two, b"TOTAL q") == b"200 OK 0 0 0 0"


def test_server_killed_during_a_call_raises_connection_lost_and_the_next_call_fails_over(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    with running_queue_server(tmp_path, *FAST) as first, \
            running_queue_server(tmp_path, *FAST) as second:
        ha = QueueClient([first.address, second.address])
        waiting = pool.submit(ha.call, "requests", b"x", output_queue="replies")
        with QueueClient(first.address) as observer:
            poll_until(lambda: observer.total("requests").jobs == 1, RESULT_DEADLINE_S,
                       what="PUT ... WAIT stored")
        first.kill()
        with pytest.raises(ConnectionLost) as caught:
            waiting.result(timeout=RESULT_DEADLINE_S)
        assert not isinstance(caught.value, ReplyTimeout)
        ha.put("q", b"after failover")
        assert ha.address == ("127.0.0.1", second.port)
        ha.close()
