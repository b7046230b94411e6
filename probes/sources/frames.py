"""Tables read in parts (one per file, schedd or page) put together."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

__all__ = ["stack"]


def stack(frames: Iterable[pd.DataFrame], columns: Sequence[str]) -> pd.DataFrame:
    """The non-empty ``frames`` one after another, or an empty table with ``columns`` (pandas
    would otherwise guess the types of a table from an empty part)."""
    parts = [f for f in frames if len(f)]
    if not parts:
        return pd.DataFrame(columns=list(columns))
    return parts[0].reset_index(drop=True) if len(parts) == 1 else pd.concat(parts, ignore_index=True)
