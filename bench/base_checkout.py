"""The code dirs of an A/B against a base commit: the base from `git archive`, then the checkout."""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def code_dirs(base: str | None, *, prefix: str) -> Iterator[dict[str, Path]]:
    """{"base <commit>": its tree, "new": the checkout} (only "new" without a base); the
    base's tree is removed afterwards."""
    if base is None:
        yield {"new": REPO}
        return
    base_dir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", base], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_dir)], input=archive, check=True)
        yield {f"base {base}": base_dir, "new": REPO}
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)
