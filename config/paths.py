"""Relative paths in a cluster config: against the config file's folder, for every command.

One rule, applied by config/load.py to every file any command reads (`slotmap run`,
`queue-server`, `manager`, `master`, `admin`, `put`, ...): a relative data folder, token
file, key file, SQLite database or python_path entry names the same place whatever folder
a process starts in, so `slotmap queue-server --config /srv/slotmap/cluster.toml` keeps
its data in /srv/slotmap/var/queue, not in the folder the shell was in. The embedded
defaults (no config file) resolve against the current folder, as they always did: there
is no file to be relative to. Paths given on a command line (`--data-dir`) are the
shell's and stay relative to the current folder.

A new setting that names a file or folder must be listed here (tests/config/
test_config_paths.py fails for a field named *_file, *_dir or *_path that is not).
`slotmap run` without --config reads deploy/default_cluster.toml against the current folder
(as the embedded defaults), and hands its children a derived file whose paths are absolute.
What `slotmap run` writes of its own (RunFiles) follows the same rule.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from config.models import ClusterConfig

# (section, key): one file or folder; section "" is the top level of the config.
PATH_KEYS: tuple[tuple[str, str], ...] = (
    ("queue_server", "data_dir"),
    ("queue_server", "token_file"),
    ("queue_server", "producer_token_file"),
    ("queue_server", "worker_token_file"),
    ("queue_server", "operator_token_file"),
    ("queue_server", "cluster_token_file"),
    ("master", "ipc_dir"),
    ("admin", "token_file"),
    ("admin", "viewer_token_file"),
    ("admin", "operator_token_file"),
    ("", "curve_secret_file"),
    ("", "curve_server_key_file"),
    ("", "curve_authorized_keys_dir"),
)
# Lists of folders.
PATH_LIST_KEYS: tuple[tuple[str, str], ...] = (("master", "python_path"),)
# Database URLs: a SQLite file's path is a path like the others.
URL_KEYS: tuple[tuple[str, str], ...] = (("manager", "database_url"),)


@dataclass(frozen=True)
class RunFiles:
    """What `slotmap run` writes besides the config's own paths: its children's logs, the
    file they run on (cluster-derived.toml), the role tokens and the master's report, all
    under `var/` of the folder the config's relative paths resolve against (`slotmap reload
    --config` finds the report there from any folder)."""

    home: Path

    @property
    def log_dir(self) -> Path:
        return self.home / "var" / "log"

    @property
    def run_dir(self) -> Path:
        return self.home / "var" / "run"

    @property
    def master_report(self) -> Path:
        return self.run_dir / "master.report.json"


def run_files(config_file: Path | None) -> RunFiles:
    """Beside `config_file`; in the current folder without one (the embedded demo's)."""
    return RunFiles(Path.cwd() if config_file is None else config_file.resolve().parent)


def absolute(path: str, folder: Path) -> str:
    """`path` when absolute, else `folder / path` made absolute and normalised (`./var/q`
    and `var/q` are one folder). The one place a config path is resolved."""
    return os.path.normpath(folder / path) if not os.path.isabs(path) else path


def sqlite_url_against(url: str, folder: Path) -> str:
    """A SQLite URL (`sqlite[+driver]:///path[?query]`, the path also as a SQLite URI
    `file:path`) with a relative file made absolute against `folder`; in-memory databases and
    other databases as given."""
    scheme, sep, rest = url.partition(":///")
    if not sep or scheme.partition("+")[0] != "sqlite":
        return url
    path, question, query = rest.partition("?")
    uri = path.startswith("file:")
    if uri:
        path = path.removeprefix("file:")
    if path in ("", ":memory:") or os.path.isabs(path):
        return url
    return f"{scheme}:///{'file:' if uri else ''}{absolute(path, folder)}{question}{query}"


def with_paths_against(config: ClusterConfig, folder: Path) -> ClusterConfig:
    """`config` with every relative path of PATH_KEYS, PATH_LIST_KEYS and URL_KEYS made
    absolute against `folder` (a config file's folder, or the current one for the embedded
    defaults); settings left at their default count too (`./var/queue`)."""
    sections: dict[str, dict[str, object]] = {}

    def put(section: str, key: str, old: object, new: object) -> None:
        if new != old:
            sections.setdefault(section, {})[key] = new

    for section, key in PATH_KEYS:
        value = getattr(_section(config, section), key)
        if value is not None:
            put(section, key, value, absolute(value, folder))
    for section, key in PATH_LIST_KEYS:
        entries = getattr(_section(config, section), key)
        put(section, key, entries, [absolute(entry, folder) for entry in entries])
    for section, key in URL_KEYS:
        url = getattr(_section(config, section), key)
        put(section, key, url, sqlite_url_against(url, folder))
    top = sections.pop("", {})
    for section, updates in sections.items():
        top[section] = getattr(config, section).model_copy(update=updates)
    return config.model_copy(update=top) if top else config


def token_files(config: ClusterConfig, *, sections: tuple[str, ...]) -> list[str]:
    """The token files `config` names (PATH_KEYS' *token_file keys) in `sections`."""
    return [path for section, key in PATH_KEYS
            if section in sections and key.endswith("token_file")
            and (path := getattr(_section(config, section), key)) is not None]


def _section(config: ClusterConfig, section: str) -> object:
    return getattr(config, section) if section else config
