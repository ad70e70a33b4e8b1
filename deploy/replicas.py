"""`slotmap run --replicas N`: the demo cluster with N queue-server replicas beside the
primary on this box, in sync mode with the manager's failover (docs/DESIGN.md "Failover
that loses nothing"), so a team can try a failover on one machine.

The replicas listen on the primary's port + 1, + 2, ...; each keeps its data next to the
primary's (`<data_dir>-replica<i>`). Every child reads one derived config, written beside
the log files, in which [queue_server] lists all servers with replicate = "sync" and
managed_failover = true. Pure but for `write_config`.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config.endpoints import parse_host_port
from config.models import ClusterConfig
from config.secret_files import write_private_text


def replica_addresses(config: ClusterConfig, count: int) -> list[str]:
    host, port = parse_host_port(config.queue_server.listen)
    return [f"{host}:{port + i}" for i in range(1, count + 1)]


def with_replicas(config: ClusterConfig, count: int) -> ClusterConfig:
    qs = config.queue_server
    servers = [qs.listen, *replica_addresses(config, count)]
    # Sync unless the config asks for async itself (to see what a failover costs there).
    replicate = qs.replicate if "replicate" in qs.model_fields_set else "sync"
    return config.model_copy(update={"queue_server": qs.model_copy(update={
        "servers": servers, "replicate": replicate, "managed_failover": True})})


def replica_args(config: ClusterConfig, config_path: Path, count: int) -> list[tuple[str, ...]]:
    """`slotmap` arguments of each replica (the config is the derived one)."""
    qs = config.queue_server
    return [("queue-server", "--config", str(config_path), "--listen", address,
             "--data-dir", f"{qs.data_dir}-replica{i}", "--replica-of", qs.listen,
             "--server-id", str(i + 1))
            for i, address in enumerate(replica_addresses(config, count), start=1)]


def restart_args(args: tuple[str, ...]) -> tuple[str, ...]:
    """A queue server's arguments for a restart after its death (deploy/launcher.py): no
    --replica-of, whose primary may be deposed by then; the manager tells it whom to
    follow."""
    if "--replica-of" not in args:
        return args
    at = args.index("--replica-of")
    return args[:at] + args[at + 2:]


def write_config(config: ClusterConfig, path: Path) -> Path:
    """The derived config, private to its owner: it holds the original's secrets (a token,
    a database password), and the children refuse a config with a secret others may read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = config.model_dump(mode="json", exclude_none=True)
    # A queue's keys as written in yours, not every default: a key written there wins over
    # the handler class's (batch_size), so a default spelled out here would hide the class's.
    document["queues"] = {name: queue.model_dump(mode="json", exclude_none=True, exclude_unset=True)
                          for name, queue in config.queues.items()}
    write_private_text(path, to_toml(document))
    return path


def to_toml(document: Mapping[str, Any]) -> str:
    """A TOML text of nested tables of scalars, lists and inline tables (no None)."""
    lines: list[str] = []
    _table(lines, (), document)
    return "\n".join(lines) + "\n"


def _table(lines: list[str], name: tuple[str, ...], table: Mapping[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict) or _inline(k, v)}
    if name and (scalars or not table):  # an empty table ([queues.q] of defaults) is still one
        lines.append(f"[{'.'.join(_key(part) for part in name)}]")
    for key, value in scalars.items():
        lines.append(f"{_key(key)} = {toml_value(value)}")
    for key, value in table.items():
        if key not in scalars:
            _table(lines, (*name, key), value)


def _inline(key: str, value: dict[str, Any]) -> bool:
    """Small tables of scalars (a rate_limit) stay inline; sections become [tables]."""
    return key == "rate_limit" or (key.endswith("_s") and all(not isinstance(v, dict) for v in value.values()))


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else toml_value(key)


def toml_value(value: Any) -> str:
    """One TOML value: a bool, number, string, list or inline table of them (the tests write
    their configs with it too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")
