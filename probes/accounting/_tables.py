"""Checks shared by the accounting functions on the tables they are given.

Kept in one place so that the error type (``ValueError`` for now) and the wording of the
messages can change once, for every function.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

RESOURCES: tuple[str, ...] = ("cpus", "memory", "disk", "gpus")
"""The resources accounted, in HTCondor's units: cpus = cores, memory = MiB, disk = KiB,
gpus = devices."""


def require_columns(table: pd.DataFrame, columns: Iterable[str], input_name: str) -> None:
    """Raise ``ValueError`` naming ``input_name`` and every column of ``columns`` it lacks.

    ``TypeError`` when ``table`` is not a DataFrame at all.
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"{input_name} must be a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{input_name} is missing columns {missing}")
