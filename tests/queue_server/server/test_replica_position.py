"""ROLE's position of a replica (the sentinel promotes the furthest one along, DESIGN.md "A
history has a name and a position"), with real managed servers: it stays where the
replica's state stands when its link to the primary is lost (it said 0, so after a kill
every replica said 0 and the first listed was promoted, one that lagged too), and it is 0
once the replica is told to follow another primary, whose history the old count is no
position in, until its snapshot comes."""
from __future__ import annotations

from tests.queue_server import server_proc
from tests.queue_server.server.ha import role
from tests.queue_server.server.test_lease_fencing import lease
from tests.queue_server.util import poll_until, put_ok

JOBS = 20


def _position(server) -> int:  # type: ignore[no-untyped-def]
    return int(role(server.connect())[7])


def test_a_replica_keeps_its_position_when_the_primary_dies_and_drops_it_to_follow_another(
        start_queue_server) -> None:
    primary = start_queue_server("--managed")
    replica = start_queue_server("--managed", "--replica-of", primary.address, "--server-id", "2")
    lease(primary, 1)
    producer = primary.connect()
    for n in range(JOBS):
        put_ok(producer, "q", 0, b"job %d" % n)
    streamed = poll_until(lambda: (p := _position(replica)) >= JOBS and p,
                          what=lambda: f"the jobs applied on the replica: {role(replica.connect())}")
    primary.kill()
    poll_until(lambda: "link to the primary" in replica.log_text(), what="the replica saw the link lost")
    assert _position(replica) == streamed, "a replica of a dead primary forgot where it stands"
    # Told to follow another primary (not listening here: its snapshot never comes), the
    # replica holds nothing of that history yet.
    nowhere = f"127.0.0.1:{server_proc.free_port()}"
    assert replica.connect().request(f"FOLLOW {nowhere} 2".encode()) == b"200 OK"
    words = role(replica.connect())
    assert (words[0], int(words[4]), int(words[7])) == (b"replica", 2, 0), words
