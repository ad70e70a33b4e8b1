"""`slotmap run --replicas N` (issue 17, G): the derived config and the replica children."""
from __future__ import annotations

from pathlib import Path

from config.load import load_config
from config.paths import run_files
from deploy.launcher import DEFAULT_CONFIG, child_specs
from deploy.replicas import with_replicas, write_config


def test_the_derived_config_reads_back_the_same(tmp_path: Path) -> None:
    derived = with_replicas(load_config(DEFAULT_CONFIG), 2)
    assert derived.queue_server.servers == ["127.0.0.1:7400", "127.0.0.1:7401", "127.0.0.1:7402"]
    assert derived.queue_server.replicate == "sync" and derived.queue_server.managed_failover
    assert load_config(write_config(derived, tmp_path / "derived.toml")) == derived


def test_a_replica_starts_beside_the_primary_and_follows_it(tmp_path: Path) -> None:
    # As `slotmap run` reads its embedded file: ./var is the current folder's.
    derived = with_replicas(load_config(DEFAULT_CONFIG, paths_against=tmp_path), 1)
    path = write_config(derived, tmp_path / "derived.toml")
    specs = child_specs(derived, path, run_files(path), with_admin=False, with_producer=False, replicas=1)
    assert [s.name for s in specs][:2] == ["queue-server", "queue-replica-1"]
    replica = specs[1].args
    assert replica[replica.index("--replica-of") + 1] == "127.0.0.1:7400"
    assert replica[replica.index("--listen") + 1] == "127.0.0.1:7401"
    assert replica[replica.index("--data-dir") + 1] == str(tmp_path / "var" / "queue-replica1")


def test_the_derived_config_writes_only_the_queue_keys_of_yours(tmp_path: Path) -> None:
    """A queue key written wins over the handler class's (batch_size): under `slotmap run` every
    default spelled out in the derived file hid the class's batch size from the master."""
    mine = tmp_path / "cluster.toml"
    mine.write_text("[queues.thumbs]\nmax_slots = 3\n\n[queues.plain]\n\n[queues.sized]\nbatch_size = 10\n")
    derived = load_config(write_config(load_config(mine), tmp_path / "var" / "derived.toml"))
    assert derived.queues["thumbs"].model_fields_set == {"max_slots"}
    assert derived.queues["plain"].model_fields_set == set()  # an empty table is still a queue
    assert derived.queues["sized"].model_fields_set == {"batch_size"}
