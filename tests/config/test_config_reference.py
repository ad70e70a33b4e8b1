"""docs/CONFIG.md is what config/reference.py prints from the models: every key, no stale text."""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from config import reference
from config.load import load_config, parse_config
from config.models import ClusterConfig
from slot.discovery import extend_sys_path

DOC = Path(__file__).resolve().parents[2] / "docs" / "CONFIG.md"
REGENERATE = "run `.venv/bin/python -m config.reference > docs/CONFIG.md`"


def test_config_doc_is_what_the_generator_prints_now() -> None:
    assert DOC.read_text(encoding="utf-8") == reference.render(), (
        f"docs/CONFIG.md is stale (a config field was added or its description changed): {REGENERATE}"
    )


def test_every_config_key_has_a_description_and_a_row_in_its_section() -> None:
    text = DOC.read_text(encoding="utf-8")
    found = list(reference.keys())
    assert len(found) > 50
    for key in found:
        assert key.field.description, f"[{key.section}] {key.name} has no Field(description=...)"
        heading = f"## `[{key.section}]`" if key.section else "## Top level"
        section_text = text.split(heading, 1)[1].split("\n## ", 1)[0]
        assert f"| `{key.name}` |" in section_text, f"[{key.section}] {key.name} missing from {DOC.name}"


def test_the_complete_example_is_valid_and_names_every_key() -> None:
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"## Complete example.*?```toml\n(.*?)```", text, re.S)
    assert example is not None
    raw = tomllib.loads(example.group(1))
    config = parse_config(raw, source="docs/CONFIG.md example")
    assert config.queues[reference.EXAMPLE_QUEUE].rate_limit is not None
    assert config.master == ClusterConfig().master
    for key in reference.keys():
        if key.section.endswith(".rate_limit"):
            assert f"{key.name} = " in example.group(1)
        else:
            assert re.search(rf"^(# )?{key.name} = ", example.group(1), re.M), f"{key.name} not in the example"


def test_python_path_is_relative_to_the_config_files_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = tmp_path / "app"
    (app / "code").mkdir(parents=True)
    (app / "code" / "sm_ref_probe_module.py").write_text("VALUE = 42\n")
    (app / "cluster.toml").write_text('[master]\npython_path = ["code"]\nhandler_modules = ["sm_ref_probe_module"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(Path("..") / "app" / "cluster.toml")
    assert config.master.python_path == [str(app / "code")]
    monkeypatch.setattr(sys, "path", list(sys.path))
    extend_sys_path(config.master.python_path)
    assert sys.path[0] == str(app / "code")
    module = __import__("sm_ref_probe_module")
    assert module.VALUE == 42
    sys.modules.pop("sm_ref_probe_module", None)
