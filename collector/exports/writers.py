"""A usage table written as a committee opens it: CSV (UTF-8, commas, ISO dates; Python's and
pandas' readers take it as is), CSV for Excel (``csv-excel``: the same with a byte-order mark,
so Excel reads accented names without an import wizard), XLSX (the table, and a sheet that
explains every column and its unit), Parquet (through pyarrow, units in the field metadata)
and JSON (the period, the columns with their units, the rows).

The formats a person reads (CSV, XLSX) hold every number rounded to
:data:`~collector.readable.SIGNIFICANT` significant digits (``0.9999999999999989`` is ``1``:
the sums' rounding, not a measure); those a program reads (Parquet, JSON) keep full precision."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from collector.errors import ConfigError
from collector.exports.sheets import split_capacity, with_total, write_table
from collector.exports.table import Period
from collector.filemode import as_umask_allows
from collector.readable import SIGNIFICANT
from collector.summaries.spec import COLUMNS, Column

__all__ = ["FORMATS", "PRECISION", "column_notes", "write_export"]


def column_notes(table: pd.DataFrame) -> list[Column]:
    """The unit and meaning of every column of ``table``."""
    notes = []
    for name in table.columns:
        if name in ("month", "day"):
            notes.append(Column(name, "UTC", f"The {name} summed ({'YYYY-MM' if name == 'month' else 'YYYY-MM-DD'})."))
        else:
            notes.append(COLUMNS[name])
    return notes


PRECISION = (
    f"CSV and XLSX: numbers rounded to {SIGNIFICANT} significant digits for reading; "
    "Parquet and JSON keep full precision"
)
"""What the exports say of their numbers' precision (the XLSX's 'columns' sheet, the docs)."""

_FLOAT_FORMAT = f"%.{SIGNIFICANT}g"


def _csv(table: pd.DataFrame, path: Path, period: Period) -> None:
    table.to_csv(path, index=False, encoding="utf-8", lineterminator="\r\n", float_format=_FLOAT_FORMAT)


def _csv_excel(table: pd.DataFrame, path: Path, period: Period) -> None:
    # the byte-order mark is what makes Excel read the file as UTF-8; other readers take it for data
    table.to_csv(path, index=False, encoding="utf-8-sig", lineterminator="\r\n", float_format=_FLOAT_FORMAT)


def _xlsx(table: pd.DataFrame, path: Path, period: Period) -> None:
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "usage"
    usage, capacity = split_capacity(table)
    keys = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    write_table(sheet, with_total(usage, keys))
    if len(capacity):  # slot snapshots have no project nor user: the pool's capacity on a sheet of its own
        write_table(book.create_sheet("capacity"), with_total(capacity, [k for k in keys if k in capacity]))
    notes = book.create_sheet("columns")
    notes.append(["column", "unit", "meaning"])
    for cell in notes[1]:
        cell.font = Font(bold=True)
    for note in column_notes(table):
        notes.append([note.name, note.unit, note.help])
    notes.append([])
    notes.append(["period", "UTC", f"{period.first} to {period.last}, both days included"])
    notes.append(["precision", "", PRECISION])
    notes.append(["TOTAL", "", "The last row of a usage sheet: sums; rates as the ratio of the summed parts."])
    notes.column_dimensions["A"].width = 32
    notes.column_dimensions["C"].width = 100
    notes.freeze_panes = "A2"
    book.save(path)


def _add_sheets(path: Path, sheets: Mapping[str, tuple[pd.DataFrame, Mapping[str, str]]]) -> None:
    """Add a sheet per table of ``sheets`` to the workbook at ``path``, its columns' meanings below it."""
    from openpyxl import load_workbook

    with path.open("rb") as f:  # by its content: openpyxl refuses a name not ending in .xlsx (the temporary file's)
        book = load_workbook(f)
    for name, (frame, meanings) in sheets.items():
        write_table(book.create_sheet(name), frame, meanings)
    book.save(path)


def _parquet(table: pd.DataFrame, path: Path, period: Period) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError("--format parquet needs pyarrow: pip install 'fairacct[parquet]'") from exc
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    notes = {n.name: n for n in column_notes(table)}
    fields = [f.with_metadata({"unit": notes[f.name].unit, "help": notes[f.name].help}) for f in arrow.schema]
    meta = {**(arrow.schema.metadata or {}), b"fairacct_period": f"{period.first}/{period.last}".encode()}
    pq.write_table(arrow.cast(pa.schema(fields, metadata=meta)), path)


def _json(table: pd.DataFrame, path: Path, period: Period) -> None:
    doc = {
        "from": str(period.first),
        "to": str(period.last),
        "columns": {n.name: {"unit": n.unit, "help": n.help} for n in column_notes(table)},
        "rows": json.loads(table.to_json(orient="records", double_precision=15)),
    }
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


FORMATS: dict[str, Callable[[pd.DataFrame, Path, Period], None]] = {
    "csv": _csv,
    "csv-excel": _csv_excel,
    "xlsx": _xlsx,
    "parquet": _parquet,
    "json": _json,
}


def write_export(
    table: pd.DataFrame,
    path: str | os.PathLike[str],
    fmt: str,
    period: Period,
    sheets: Mapping[str, tuple[pd.DataFrame, Mapping[str, str]]] | None = None,
) -> Path:
    """Write ``table`` to ``path`` in ``fmt`` (one of :data:`FORMATS`) atomically: a reader never
    sees half a file. An XLSX gets ``sheets`` too (name: the table and what each column means),
    beside the usage (the APEL view). Returns the path."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    as_umask_allows(fd)  # readable by whom the umask says, not 0600 as mkstemp makes it
    os.close(fd)
    try:
        FORMATS[fmt](table, Path(tmp), period)
        if fmt == "xlsx" and sheets:
            _add_sheets(Path(tmp), sheets)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
