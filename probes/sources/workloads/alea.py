"""Machine files of the Alea simulator, into a machines table.

One cluster per line, tab separated (any whitespace is accepted): id, name, nodes, CPUs per
node, speed, RAM per node, then optional columns. The files disagree on the unit of RAM:
``wagap-2013.machines`` gives it in KB (``529426432`` for an 80-CPU zewura node: 505 GiB),
``NGI_CZ.machines`` in GB (``512``), with an undocumented number in column 7 and GPUs per
node in column 8. With ``ram_unit="auto"`` the unit is the one of KB, MB and GB that puts the
median node at a plausible 128 MiB to 128 GiB per core; the reading says which was assumed
and why, and an explicit unit overrides it. KB, MB and GB are taken as KiB, MiB and GiB, as
the kernel and the batch systems report memory.

The table has the machines-table columns (see :mod:`probes.accounting.machines`: ``name``,
``count`` = nodes, ``cpus``, ``memory`` in MiB, ``disk`` unknown, ``gpus`` from column 8 or 0,
``speed`` from column 5, ``node_cost`` 1.0) plus ``alea_id``, ``column7``, ``source`` and
``line``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from probes.accounting.machines import machines_table
from probes.errors import SourceError
from probes.sources.workloads.swf import read_lines

__all__ = ["ALEA_COLUMNS", "RAM_UNITS", "AleaReading", "read_alea_machines"]

RamUnit = Literal["auto", "KB", "MB", "GB"]
RAM_UNITS: dict[str, float] = {"KB": 1.0 / 1024.0, "MB": 1.0, "GB": 1024.0}
"""MiB per unit of RAM in a machines file."""
ALEA_COLUMNS = ("id", "name", "nodes", "CPUs per node", "speed", "RAM per node", "column 7", "GPUs per node")
_PLAUSIBLE_MIB_PER_CORE = (128.0, 128.0 * 1024.0)


@dataclass(frozen=True)
class AleaReading:
    """How a machines file was read: ``ram_unit`` (KB, MB or GB), whether it was ``assumed``
    (auto) rather than given, and a one-line ``note`` saying so, for the user."""

    ram_unit: str
    assumed: bool
    note: str


def read_alea_machines(
    path: str | os.PathLike[str], *, ram_unit: RamUnit | str = "auto"
) -> tuple[pd.DataFrame, AleaReading]:
    """Read an Alea machines file into a machines table; see the module's docstring.

    Raises ``SourceError`` naming the file, the line and the column for a line that cannot be
    read, and for RAM whose unit cannot be told (then give ``ram_unit``).
    """
    name = os.fspath(path)
    unit = str(ram_unit).upper() if str(ram_unit).lower() != "auto" else "auto"
    if unit != "auto" and unit not in RAM_UNITS:
        raise SourceError(f"{name}: RAM unit must be auto, KB, MB or GB, got {ram_unit!r}")
    rows: list[dict[str, object]] = []
    for i, raw in enumerate(read_lines(path, "an Alea machines file"), 1):
        text = raw.strip()
        if not text or text.startswith(("#", ";")):
            continue
        fields = text.split("\t") if "\t" in text else text.split()
        fields = [f.strip() for f in fields]
        if not 6 <= len(fields) <= 8:
            raise SourceError(
                f"{name} line {i}: expected 6 to 8 tab-separated columns (id, name, nodes, CPUs per node, "
                f"speed, RAM per node, then optionally column 7 and GPUs per node), got {len(fields)}"
            )
        row: dict[str, object] = {"alea_id": fields[0], "name": fields[1], "source": name, "line": i}
        if not fields[1]:
            raise SourceError(f"{name} line {i}: column 2 (name): expected a cluster name, got ''")
        for col, key, low in (
            (3, "count", 1),
            (4, "cpus", 1e-9),
            (5, "speed", 1e-9),
            (6, "ram", 0),
            (7, "column7", None),
            (8, "gpus", 0),
        ):
            if col > len(fields):
                continue
            text_value = fields[col - 1]
            try:
                value = float(text_value)
            except ValueError:
                raise SourceError(
                    f"{name} line {i}: column {col} ({ALEA_COLUMNS[col - 1]}): expected a number, got {text_value!r}"
                ) from None
            if not np.isfinite(value) or (low is not None and value < low):
                need = "greater than 0" if low and low < 1 else f"at least {low}"
                raise SourceError(
                    f"{name} line {i}: column {col} ({ALEA_COLUMNS[col - 1]}): "
                    f"expected a number {need}, got {text_value!r}"
                )
            if key == "count" and value != int(value):
                raise SourceError(
                    f"{name} line {i}: column 3 (nodes): expected a whole number of nodes, got {text_value!r}"
                )
            row[key] = value
        rows.append(row)
    if not rows:
        raise SourceError(f"{name}: no machines, only comments; expected an Alea machines file")
    frame = pd.DataFrame.from_records(rows)
    reading = _ram_unit(frame, unit, name)
    frame["memory"] = frame["ram"] * RAM_UNITS[reading.ram_unit]
    if "gpus" not in frame.columns:
        frame["gpus"] = 0.0
    frame["gpus"] = frame["gpus"].fillna(0.0)
    if "column7" not in frame.columns:
        frame["column7"] = np.nan
    dupes = frame.loc[frame["name"].duplicated(), ["name", "line"]]
    if len(dupes):
        d = dupes.iloc[0]
        raise SourceError(f"{name} line {d['line']}: column 2 (name): cluster {d['name']!r} is listed twice")
    table = machines_table(frame, input_name=name)
    for extra in ("alea_id", "column7", "source", "line"):
        table[extra] = frame[extra].to_numpy()
    return table, reading


def _ram_unit(frame: pd.DataFrame, unit: str, name: str) -> AleaReading:
    per_core = float(np.median(frame["ram"] / frame["cpus"]))  # in the file's unit
    if unit != "auto":
        mib = per_core * RAM_UNITS[unit]
        return AleaReading(
            unit, False, f"{name}: RAM per node read as {unit} (as told): {_size(mib)} per core at the median"
        )
    low, high = _PLAUSIBLE_MIB_PER_CORE
    fits = [u for u, mib in RAM_UNITS.items() if low <= per_core * mib <= high]
    if len(fits) != 1:
        raise SourceError(
            f"{name}: cannot tell the unit of column 6 (RAM per node): the median node has {per_core:g} per core, "
            f"which is {_size(per_core * RAM_UNITS['KB'])} as KB, {_size(per_core)} as MB and "
            f"{_size(per_core * RAM_UNITS['GB'])} as GB; give the unit (--ram-unit KB|MB|GB)"
        )
    chosen = fits[0]
    return AleaReading(
        chosen,
        True,
        f"{name}: RAM per node read as {chosen}, the only unit giving a plausible "
        f"{_size(per_core * RAM_UNITS[chosen])} per core at the median (--ram-unit overrides)",
    )


def _size(mib: float) -> str:
    if mib >= 1024:
        return f"{mib / 1024:.3g} GiB"
    if mib >= 1:
        return f"{mib:.3g} MiB"
    if mib * 1024 >= 1:
        return f"{mib * 1024:.3g} KiB"
    return f"{mib * 1024 * 1024:.3g} bytes"
