"""Columns filled part by part: the chunks of a big file become one table held once.

Concatenating per-chunk parts at the end would hold the table twice, and leave the heap too
fragmented to give the parts' memory back. So the columns are allocated once, for the number
of rows the input's size suggests (rows per byte so far), and grown by at least a quarter when
that was too few.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["ColumnBuilder"]

_SLACK = 1.01  # allocate for 1 % more rows than the estimate: one growth is dearer than that
_GROWTH = 1.25


class ColumnBuilder:
    """Collects parts, each a mapping of the same column names to numpy arrays of one length.

    ``size`` is the input's length in bytes, and ``done`` (given with each part) how many of
    them have been read; None when the input's length is unknown.
    """

    def __init__(self, size: int | None = None) -> None:
        self.size = size
        self.n = 0
        self.columns: dict[str, np.ndarray] = {}

    def append(self, part: Mapping[str, np.ndarray], done: int | None = None) -> None:
        m = len(next(iter(part.values()))) if part else 0
        if not m:
            return
        if not self.columns:
            self.columns = {name: np.empty(0, dtype=col.dtype) for name, col in part.items()}
        elif part.keys() != self.columns.keys():
            raise ValueError(f"a part has columns {sorted(part)}, expected {sorted(self.columns)}")
        capacity = len(next(iter(self.columns.values())))
        if self.n + m > capacity:
            wanted = self.n + m
            if self.size and done:
                wanted = max(wanted, int(_SLACK * wanted * self.size / done) + 16)
            self._grow(max(wanted, int(_GROWTH * capacity)))
        end = self.n + m
        for name, col in part.items():
            self.columns[name][self.n : end] = col
        self.n = end

    def _grow(self, capacity: int) -> None:
        for name, old in self.columns.items():  # one column at a time: only one is held twice
            new = np.empty(capacity, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            self.columns[name] = new

    def result(self) -> dict[str, np.ndarray]:
        """The columns, trimmed to the rows appended ({} when there were none). The builder
        gives them up: it is empty afterwards."""
        out = {name: col[: self.n] for name, col in self.columns.items()}
        self.columns, self.n = {}, 0
        return out
