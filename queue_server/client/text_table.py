"""The `slotmap` commands' plain-text tables: each column as wide as its widest cell, so no
value is cut and each starts under its heading (fixed widths let a long time zone or key push
the rest of its row out of line)."""
from __future__ import annotations

from collections.abc import Collection, Sequence


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Collection[int] = (),
               aligned: int | None = None) -> str:
    """One line per row under `header`, two spaces between columns, no trailing blanks.
    `right`: the columns (by index) aligned right, numbers; `aligned`: only the first that
    many columns are padded, the rest follow as they are (long text, such as an error)."""
    padded = len(header) if aligned is None else aligned
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[index]) for row in table) for index in range(padded)]
    lines = []
    for row in table:
        cells = [cell.rjust(width) if index in right else cell.ljust(width)
                 for index, (cell, width) in enumerate(zip(row, widths, strict=False))]
        lines.append("  ".join([*cells, *row[padded:]]).rstrip() + "\n")
    return "".join(lines)
