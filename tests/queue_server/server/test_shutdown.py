"""QUIT, SHUTDOWN and SIGTERM: replies, disconnects, exit code 0 and data kept."""
from __future__ import annotations

from tests.queue_server.util import barrier, drain, get_job, put_ok, total


def test_quit_replies_221_goodbye_then_closes_only_that_connection(queue_server):
    client, other = queue_server.connect(), queue_server.connect()
    client.send(b"QUIT\r\nPING\r\n")
    client.expect(b"221 Goodbye\r\n")
    assert client.closed()
    assert client.pending() == b"", "nothing may follow 221 Goodbye"
    barrier(other)
    assert queue_server.is_running()


def test_shutdown_replies_221_shutting_down_and_exits_0(queue_server):
    client = queue_server.connect()
    client.send(b"SHUTDOWN\r\n")
    client.expect(b"221 Shutting Down\r\n")
    assert client.closed()
    assert queue_server.wait_exit() == 0


def test_shutdown_disconnects_every_client(queue_server):
    idle, blocked, admin = queue_server.connect(), queue_server.connect(), queue_server.connect()
    blocked.send(b"GETB q\r\n")
    barrier(admin)
    admin.send(b"SHUTDOWN\r\n")
    admin.expect(b"221 Shutting Down\r\n")
    assert idle.closed() and idle.pending() == b""
    assert blocked.closed() and blocked.pending() == b""
    assert queue_server.wait_exit() == 0


def test_shutdown_keeps_the_data_even_without_fsync(start_queue_server):
    server = start_queue_server("--fsync", "never")
    client = server.connect()
    put_ok(client, "q", 2, b"ready", "IS it")
    put_ok(client, "q", 1, b"running")
    job = get_job(client, "GET q")
    assert job.data == b"ready"
    client.send(b"SHUTDOWN\r\n")
    client.expect(b"221 Shutting Down\r\n")
    assert server.wait_exit() == 0
    client = start_queue_server("--fsync", "never", data_dir=server.data_dir).connect()
    assert total(client, "q") == (1, 2, 2, 0)
    assert [(j.data, j.item) for j in drain(client, "q")] == [(b"ready", "it"), (b"running", None)]


def test_sigterm_exits_0_and_keeps_the_data(start_queue_server):
    server = start_queue_server("--fsync", "never")
    client = server.connect()
    put_ok(client, "q", 0, b"kept")
    put_ok(client, "q", 5, b"delayed", "DELAY 1000")
    server.terminate()
    assert client.closed()
    assert server.wait_exit() == 0
    client = start_queue_server("--fsync", "never", data_dir=server.data_dir).connect()
    assert total(client, "q") == (1, 2, 2, 0)
    assert [j.data for j in drain(client, "q")] == [b"kept"]


def test_sigterm_with_fsync_everysec_keeps_the_data(start_queue_server):
    server = start_queue_server("--fsync", "everysec")
    client = server.connect()
    for n in range(20):
        put_ok(client, "q", 0, b"job%d" % n)
    server.terminate()
    assert server.wait_exit() == 0
    client = start_queue_server("--fsync", "everysec", data_dir=server.data_dir).connect()
    assert [j.data for j in drain(client, "q")] == [b"job%d" % n for n in range(20)]
