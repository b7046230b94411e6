"""Small builders of the accounting tables for the tests (no files are read)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from probes.accounting import RESOURCES, CanonicalUnit

GIB = 1024  # MiB per GiB: HTCondor memory is in MiB

# Seed 003 section 4: "1 CPU core and 2 GB of memory" for CPU nodes, "1 GPU chip" for GPU nodes.
CPU_UNIT = CanonicalUnit("cpu", {"cpus": 1, "memory": 2 * GIB})
GPU_UNIT = CanonicalUnit("gpu", {"gpus": 1})
UNITS: Mapping[str, CanonicalUnit] = {"cpu": CPU_UNIT, "gpu": GPU_UNIT}


def slots_table(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """A slots table; resources not given are 0, partition "cpu", interval one hour."""
    records = []
    for i, row in enumerate(rows):
        record: dict[str, Any] = {"name": f"slot1@node{i}", "partition": "cpu", "interval_s": 3600.0}
        for r in RESOURCES:
            record[f"total_{r}"] = 0.0
            record[f"unallocated_{r}"] = 0.0
        record.update(row)
        records.append(record)
    return pd.DataFrame.from_records(records)


def allocations_table(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """An allocations table; resources not given are 0, interval one hour."""
    records = []
    for i, row in enumerate(rows):
        record: dict[str, Any] = {
            "name": f"slot1_{i}",
            "job_id": f"schedd#{i}.0#0",
            "user": "alice@site",
            "interval_s": 3600.0,
        }
        for r in RESOURCES:
            record[r] = 0.0
        record.update(row)
        records.append(record)
    return pd.DataFrame.from_records(records)
