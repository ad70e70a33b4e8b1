"""Load a cluster config file (TOML) into models; errors name the file and the key."""
from __future__ import annotations

import logging
import os
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import ValidationError

from config.errors import ConfigError
from config.models import ClusterConfig
from config.paths import with_paths_against
from config.problems import describe
from config.secret_files import open_file_error, too_open

log = logging.getLogger(__name__)

# The config file of the client commands (put, get, stats, jobs, job, retry, delete) when no
# --config is given.
CONFIG_ENV = "SLOTMAP_CONFIG"


def load_config(path: str | Path | None, *, paths_against: Path | None = None) -> ClusterConfig:
    """Read `path` (or return the embedded defaults when None). Its relative paths are made
    absolute against its folder (config/paths.py), or against `paths_against` when given."""
    if path is None:
        return ClusterConfig()
    file = Path(path)
    try:
        with file.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            raw = tomllib.loads(handle.read().decode("utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{file}: no such config file") from exc
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from exc
    config = parse_config(raw, source=str(file))
    held = secrets_in(config)
    if held and too_open(mode):
        raise ConfigError(open_file_error(file, mode, "config file", holds=" and ".join(held))
                          + ", or move the secret to a file of its own (token_file) or the environment "
                          "(docs/SECURITY.md)")
    for name in config.schedules_without_queue_config():
        log.warning("%s: schedules.%s puts into queue %r, which no [queues.*] table names "
                    "(a typo? it fires there anyway)", file, name, config.schedules[name].queue)
    return with_paths_against(config, paths_against or file.resolve().parent)


def secrets_in(config: ClusterConfig) -> list[str]:
    """The keys of `config` that hold a secret: a token, a database password."""
    held = [name for name, value in (("queue_server.token", config.queue_server.token),
                                     ("admin.token", config.admin.token)) if value is not None]
    if has_password(config.manager.database_url):
        held.append("the password in manager.database_url")
    return held


def has_password(url: str) -> bool:
    try:
        return bool(urlsplit(url).password)
    except ValueError:  # a malformed URL: the database driver says why when it is used
        return False


def without_password(url: str) -> str:
    """`url` with its password shown as ***, for logs and messages. Everything before the
    last @ of a URL without `scheme://` is hidden: nothing there can be told from a password."""
    head, at, host = url.rpartition("@")
    if not at:
        return url
    scheme, sep, credentials = head.partition("://")
    if not sep:
        return f"***@{host}"
    user, colon, _password = credentials.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"


def parse_config(raw: dict[str, object], *, source: str = "<config>") -> ClusterConfig:
    try:
        return ClusterConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe(exc)}") from exc
