"""Load a cluster config file (TOML) into models; errors name the file and the key."""
from __future__ import annotations

import logging
import tomllib
from pathlib import Path

from pydantic import ValidationError

from config.errors import ConfigError
from config.models import ClusterConfig

log = logging.getLogger(__name__)


def load_config(path: str | Path | None) -> ClusterConfig:
    """Read `path` (or return the embedded defaults when None)."""
    if path is None:
        return ClusterConfig()
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{file}: no such config file") from exc
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from exc
    config = parse_config(raw, source=str(file))
    for name in config.schedules_without_queue_config():
        log.warning("%s: schedules.%s puts into queue %r, which no [queues.*] table names "
                    "(a typo? it fires there anyway)", file, name, config.schedules[name].queue)
    return with_paths_from(config, file.resolve().parent)


def with_paths_from(config: ClusterConfig, folder: Path) -> ClusterConfig:
    """`master.python_path` entries made absolute against the config file's folder, so handler
    code is found whatever folder a process starts in."""
    paths = [str((folder / entry).resolve()) for entry in config.master.python_path]
    if paths == config.master.python_path:
        return config
    master = config.master.model_copy(update={"python_path": paths})
    return config.model_copy(update={"master": master})


def parse_config(raw: dict[str, object], *, source: str = "<config>") -> ClusterConfig:
    try:
        return ClusterConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{source}: {problems}") from exc
