"""No product file over 400 lines (issue 30, point 4): past that a module holds more than one
responsibility, and a reader cannot keep it in view. Tests and benchmarks are not product."""
from __future__ import annotations

from test_import_graph import product_modules

MAX_LINES = 400


def test_no_product_file_is_over_400_lines() -> None:
    too_long = {
        str(path): lines
        for path in product_modules().values()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not too_long, f"split these (one responsibility per module): {too_long}"
