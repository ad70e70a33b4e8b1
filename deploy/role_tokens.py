"""`slotmap run` with a queue server token: a token for each role (docs/SECURITY.md
"Roles"), so every child sends the least it needs: the demo producer the producer's, the
master and its slots the worker's, the dashboard the operator's, replicas and the manager's
sentinel the cluster's; the configured token stays the admin's. Generated once into a
folder of the run (mode 0600, refused at start if made readable to others) and named in the
derived config the children read. Without a token (the loopback default) nothing changes.
"""
from __future__ import annotations

import secrets
from pathlib import Path

from config.models import ClusterConfig
from config.secret_files import write_private_text
from config.tokens import ROLE_FILES


def with_role_tokens(config: ClusterConfig, folder: Path) -> ClusterConfig:
    """The config with a generated token file for each role it does not set (only when an
    admin token is configured); a file from an earlier run is kept, so clients outside the
    run that were handed one keep working."""
    qs = config.queue_server
    if qs.token is None and qs.token_file is None:
        return config
    updates: dict[str, str] = {}
    for role, key in ROLE_FILES.items():
        if getattr(qs, key) is not None:
            continue
        path = folder / f"{role}.token"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_private_text(path, secrets.token_urlsafe(32) + "\n")
        updates[key] = str(path.resolve())
    if not updates:
        return config
    return config.model_copy(update={"queue_server": qs.model_copy(update=updates)})
