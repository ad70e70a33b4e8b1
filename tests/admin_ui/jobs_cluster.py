"""A real queue server and a real `slotmap admin` pointed at it (with the manager's tables in
SQLite, no manager): what the jobs tests of the dashboard, API, metrics and browser share."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from admin_proc import AdminProc, start_admin
from procs import server_proc

from manager.storage.store import Store
from queue_server.client import QueueClient

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "handlers.py", line 12, in handle\n'
    "    resize(job.data)\n"
    "ValueError: bad photo 7"
)


@dataclass
class JobsCluster:
    queue_server: object
    admin: AdminProc
    token: str
    database_url: str = ""

    @property
    def address(self) -> str:
        return str(self.queue_server.address)  # type: ignore[attr-defined]

    def client(self) -> QueueClient:
        return QueueClient(self.address)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _config(root: Path, address: str, database_url: str, *, token: str, admin_settings: str,
            queues: tuple[str, ...]) -> Path:
    config = root / "cluster.toml"
    config.write_text(
        f'[queue_server]\nlisten = "{address}"\n\n'
        f'[manager]\ndatabase_url = "{database_url}"\n\n'
        + (f'[admin]\ntoken = "{token}"\n' if token else '[admin]\n')  # no token: read-only
        + f'{admin_settings}\n'
        + "".join(f'[queues.{queue}]\nmax_slots = 1\n' for queue in queues)
    )
    return config


@contextlib.contextmanager
def jobs_cluster(root: Path, *, token: str, extra: tuple[str, ...] = (),
                 admin_settings: str = "", queues: tuple[str, ...] = ("photos",)) -> Iterator[JobsCluster]:
    """`admin_settings`: more lines of the config's [admin] section; `queues`: the configured ones
    (a module sharing one cluster gives each test a queue of its own)."""
    database_url = f"sqlite:///{root / 'slotmap.db'}"
    Store.open(database_url).close()  # the manager's tables, as a manager would create them
    queue_server = server_proc.start_queue_server(root, "--fsync", "never")
    try:
        config = _config(root, str(queue_server.address), database_url, token=token,
                         admin_settings=admin_settings, queues=queues)
        admin = start_admin(config, root, *extra)
        try:
            yield JobsCluster(queue_server, admin, token, database_url)
        finally:
            admin.stop_later()
    finally:
        queue_server.kill()


@contextlib.contextmanager
def other_admin(cluster: JobsCluster, root: Path, *, token: str) -> Iterator[JobsCluster]:
    """Another dashboard (another token, or none) over `cluster`'s queue server and database."""
    config = _config(root, cluster.address, cluster.database_url, token=token, admin_settings="",
                     queues=("photos",))
    admin = start_admin(config, root)
    try:
        yield JobsCluster(cluster.queue_server, admin, token, cluster.database_url)
    finally:
        admin.stop_later()


def make_dead(client: QueueClient, queue: str, key: str, data: bytes = b"photo-7.jpg") -> None:
    """Put a job under `key`, take it with its key, fail it as dead with a traceback."""
    assert client.put_job(queue, data, key=key).key == key
    [job] = client.get(queue, keys=True)
    assert job.key == key
    assert client.fail(job.id, TRACEBACK, dead=True).dead


def make_dead_of(client: QueueClient, queue: str, key: str, error: str) -> None:
    """As make_dead, the job's data its key and its traceback ending in `error` ("OSError: disk")."""
    client.put_job(queue, key.encode(), key=key)
    [job] = client.get(queue, keys=True)
    assert job.key == key
    assert client.fail(job.id, f"Traceback (most recent call last):\n  ...\n{error}", dead=True).dead
