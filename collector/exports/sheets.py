"""The XLSX's sheets as a committee opens them: the usage rows apart from the pool's capacity
(slot snapshots have no project nor user: on a sheet of their own), a total row under every
usage table, numbers stored as numbers and shown with their unit (a cell's number format, so a
sum in the spreadsheet still works), the header frozen and every column as wide as its widest
cell."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from collector.readable import round_significant
from collector.summaries.spec import COLUMNS

__all__ = ["CAPACITY", "TOTAL", "split_capacity", "unit_of", "with_total", "write_table"]

TOTAL = "TOTAL"
"""The first cell of a total row."""

CAPACITY = ("n_slot_snapshots", "slot_core_hours", "overhead_cu_hours", "overhead_cu_hours_fitting_idle")
"""The usage table's columns of the slot snapshots: the pool's capacity and its true overhead."""

_OWNERS = ("project", "user", "group", "submitter")  # who used: a slot snapshot has none of them
_RATIOS = {"billed_over_held": ("billed_core_hours", "held_core_hours"),
           "penalty_over_cpu_only": ("penalty_hours", "cpu_only_hours")}  # fmt: skip
_MAX_WIDTH = 60  # characters: a wider column (a long meaning) wraps instead of pushing the rest off screen


def split_capacity(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``table`` (:func:`~collector.exports.table.usage_table`'s) as its usage rows without the
    capacity columns, and the capacity: the :data:`CAPACITY` columns summed per key that a slot
    has (month, day, site, pool, ...; not project nor user), where there were snapshots."""
    present = [c for c in CAPACITY if c in table.columns]
    keys = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    used = (table["n_jobs"] > 0) | (table["n_bills"] > 0) if "n_bills" in table else table["n_jobs"] > 0
    usage = table.loc[used, [c for c in table.columns if c not in present]].reset_index(drop=True)
    slot_keys = [k for k in keys if k not in _OWNERS]
    seen = table.loc[table[present[0]] > 0] if present else table.iloc[0:0]
    capacity = (
        seen.groupby(slot_keys, dropna=False, sort=True)[present].sum().reset_index()
        if slot_keys
        else seen[present].sum().to_frame().T
    )
    return usage, capacity.reset_index(drop=True)


def with_total(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``frame`` with a :data:`TOTAL` row under it: sums of its numbers, its rates as the ratio of
    the summed parts (not a sum of rates), shares 100 where they were of the whole, percents of
    an award as the summed used over the summed award. A frame without ``keys`` is one row, its
    own total: unchanged."""
    if frame.empty or not keys:
        return frame
    total: dict[str, Any] = {}
    for c in frame.columns:
        values = frame[c]
        if c in keys or not pd.api.types.is_numeric_dtype(values):
            total[c] = None
        else:
            total[c] = values.sum(min_count=1)
    for rate, (top, bottom) in _RATIOS.items():
        if rate in frame and top in frame and bottom in frame:
            total[rate] = total[top] / total[bottom] if total[bottom] else None
    if {"overhead_percent", "overhead_core_hours", "capacity_core_hours"} <= set(frame.columns):
        capacity = total["capacity_core_hours"]
        total["overhead_percent"] = 100.0 * total["overhead_core_hours"] / capacity if capacity else None
    for c in frame.columns:
        if c.endswith("_share"):
            total[c] = None  # a share's total is 100 only when the rows are one period: said by the rows
        if c.endswith("_award_used_percent"):
            resource = c.split("_")[0]
            awarded = frame[f"awarded_{resource}_hours"]
            used = frame.loc[awarded.notna(), f"{resource}_hours"].sum()  # of the rows with an award only
            total[c] = 100.0 * used / awarded.sum() if awarded.notna().any() else None
    total[keys[0]] = TOTAL
    return pd.concat([frame, pd.DataFrame([total], columns=frame.columns)], ignore_index=True)


def unit_of(column: str) -> str:
    """The unit a column's numbers are shown with ("" for none)."""
    if column in COLUMNS:
        unit = COLUMNS[column].unit
        return "" if unit in ("UTC", "ratio", "") else unit
    for suffix, unit in (("_percent", "%"), ("core_hours", "core-hours"), ("gpu_hours", "GPU-hours"),
                         ("_hours", "hours"), ("_jobs", "jobs")):  # fmt: skip
        if column.endswith(suffix):
            return unit
    return ""


def _cell(value: Any) -> Any:
    """A value as an XLSX cell holds it: missing is empty, a float rounded for reading."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    plain = value.item() if hasattr(value, "item") else value
    return round_significant(plain) if isinstance(plain, float) else plain


def _format(unit: str, integer: bool) -> str:
    number = "#,##0" if integer else "#,##0.00"
    return f'{number} "{unit}"' if unit and unit != "%" else f"{number}\\%" if unit == "%" else number


def _shown(value: Any, unit: str) -> str:
    """Roughly what a cell shows, to size its column."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    return f"{value:,.2f} {unit}".strip()


def write_table(sheet: Any, frame: pd.DataFrame, meanings: Mapping[str, str] | None = None) -> None:
    """``frame`` into the openpyxl ``sheet`` from its first row: the header bold and frozen, a
    :data:`TOTAL` row bold, numbers with their unit in their cell format, widths to fit; then
    (after a blank row) each column's meaning, when ``meanings`` is given."""
    from openpyxl.styles import Alignment, Font
    from openpyxl.utils import get_column_letter

    sheet.append([str(c) for c in frame.columns])
    widths = [len(str(c)) for c in frame.columns]
    units = [unit_of(str(c)) for c in frame.columns]
    for row in frame.itertuples(index=False):
        cells = [_cell(v) for v in row]
        sheet.append(cells)
        widths = [max(w, len(_shown(v, u))) for w, v, u in zip(widths, cells, units, strict=True)]
        if cells and cells[0] == TOTAL:
            for cell in sheet[sheet.max_row]:
                cell.font = Font(bold=True)
    for cell in sheet[1]:
        cell.font = Font(bold=True)
        cell.alignment = Alignment(wrap_text=False)
    for i, (name, unit) in enumerate(zip(frame.columns, units, strict=True), start=1):
        letter = get_column_letter(i)
        sheet.column_dimensions[letter].width = min(_MAX_WIDTH, widths[i - 1] + 2)
        integer = pd.api.types.is_integer_dtype(frame[name]) or str(name).startswith("n_")
        if pd.api.types.is_numeric_dtype(frame[name]) or unit:
            for (cell,) in sheet.iter_rows(min_row=2, max_row=len(frame) + 1, min_col=i, max_col=i):
                if isinstance(cell.value, int | float) and not isinstance(cell.value, bool):
                    cell.number_format = _format(unit, integer)
    sheet.freeze_panes = "B2"  # the header, and the first column that names the row
    if meanings:
        sheet.append([])
        for column, meaning in meanings.items():
            sheet.append([column, meaning])
