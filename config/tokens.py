"""Where a queue-server token comes from: a file or the environment, so it never has to be on
a command line that `ps` shows. Used by `slotmap queue-server` and `slotmap put/get/stats`."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from config.endpoints import check_token
from config.secret_files import read_private_text

TOKEN_ENV = "SLOTMAP_QUEUE_TOKEN"
TOKEN_FILE_ENV = "SLOTMAP_QUEUE_TOKEN_FILE"


def read_token_file(path: str | Path) -> str:
    """The token on the file's first line (without its line end). ValueError if the file
    cannot be read, others may read it (the message says which chmod), or the token
    cannot be sent."""
    raw = read_private_text(path, "token file")
    lines = raw.splitlines()
    token = lines[0] if lines else ""
    return check_token(token, what=f"the token in {path}")


def resolve_token(
    *, flag: str | None = None, flag_file: str | None = None,
    config_token: str | None = None, config_file: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> str | None:
    """The first token given, in this order: --token, --token-file, $SLOTMAP_QUEUE_TOKEN,
    $SLOTMAP_QUEUE_TOKEN_FILE, the config's token_file, the config's token. None: no AUTH.
    ValueError (one line) for an empty or unsendable token or an unreadable file."""
    if flag is not None:
        return check_token(flag, what="--token")
    if flag_file is not None:
        return read_token_file(flag_file)
    if TOKEN_ENV in environ:
        return check_token(environ[TOKEN_ENV], what=f"${TOKEN_ENV}")
    if environ.get(TOKEN_FILE_ENV):
        return read_token_file(environ[TOKEN_FILE_ENV])
    if config_file is not None:
        return read_token_file(config_file)
    if config_token is not None:
        return check_token(config_token, what="[queue_server] token")
    return None


class TokenSources(Protocol):
    """[queue_server]'s token settings (config/models.py QueueServerConfig)."""
    token: str | None
    token_file: str | None
    producer_token_file: str | None
    worker_token_file: str | None
    operator_token_file: str | None
    cluster_token_file: str | None


ROLE_FILES = {"producer": "producer_token_file", "worker": "worker_token_file",
              "operator": "operator_token_file", "cluster": "cluster_token_file"}


def role_token(config: TokenSources, role: str, *, environ: Mapping[str, str] = os.environ) -> str | None:
    """The token a component acting as `role` (docs/SECURITY.md "Roles") sends: one handed to
    this process ($SLOTMAP_QUEUE_TOKEN(_FILE)) first, then the role's own file, then the
    admin token of a setup with one token for all. ValueError as resolve_token."""
    if TOKEN_ENV in environ or environ.get(TOKEN_FILE_ENV):
        return resolve_token(environ=environ)
    path = getattr(config, ROLE_FILES[role])
    if path is not None:
        return read_token_file(path)
    return resolve_token(config_token=config.token, config_file=config.token_file, environ=environ)


def component_token(config: TokenSources, role: str = "producer") -> str | None:
    """role_token for a component reading its config (the manager: producer for its STATS
    reads and the schedules' PUTs, the cluster credential for the sentinel): ConfigError,
    the config's own error, for a token it cannot use."""
    from config.errors import ConfigError

    try:
        return role_token(config, role)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
