"""Every setting that names a file or folder is resolved against the config file's folder
(config/paths.py): a new *_file, *_dir or *_path setting not listed there fails here."""
from __future__ import annotations

from pydantic import BaseModel

from config.models import ClusterConfig
from config.paths import PATH_KEYS, PATH_LIST_KEYS, URL_KEYS

PATH_SUFFIXES = ("_file", "_dir", "_path")
# Named like a path but not one of the config's files: a path inside something else.
NOT_FILES: set[tuple[str, str]] = set()


def path_like_settings() -> set[tuple[str, str]]:
    found = {("", name) for name in ClusterConfig.model_fields if name.endswith(PATH_SUFFIXES)}
    for section, field in ClusterConfig.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            found |= {(section, name) for name in model.model_fields if name.endswith(PATH_SUFFIXES)}
    return found - NOT_FILES


def test_every_path_setting_is_resolved_against_the_config_file() -> None:
    listed = set(PATH_KEYS) | set(PATH_LIST_KEYS) | set(URL_KEYS)
    missing = path_like_settings() - listed
    assert not missing, f"add these to config/paths.py: {sorted(missing)}"
    assert ("queue_server", "data_dir") in path_like_settings()  # the scan does find fields
