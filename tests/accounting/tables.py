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


# The two partitionable slots of the real HTCondor 25.0.13 pool (../shared/fixtures/README.md),
# from its numbers:
#   slot1@cpu-node1@vm: 16 cores / 32768 MiB, dynamic slots 4/2048 and 12/8192
#     -> unallocated 16-4-12 = 0 cores, 32768-2048-8192 = 22528 MiB
#   slot1@gpu-node1@vm: 16 cores / 32768 MiB / 4 GPUs, dynamic slots 4/2048, 4/2048,
#     2/4096/1 GPU, 1/24576 -> unallocated 5 cores, 0 MiB, 3 GPUs
CONDOR25_SLOTS: tuple[dict[str, Any], ...] = (
    {"name": "slot1@cpu-node1@vm", "partition": "cpu", "total_cpus": 16, "total_memory": 32768,
     "unallocated_cpus": 0, "unallocated_memory": 22528, "interval_s": 300},
    {"name": "slot1@gpu-node1@vm", "partition": "gpu", "total_cpus": 16, "total_memory": 32768, "total_gpus": 4,
     "unallocated_cpus": 5, "unallocated_memory": 0, "unallocated_gpus": 3, "interval_s": 300},
)  # fmt: skip


def condor25_slots() -> pd.DataFrame:
    return slots_table(CONDOR25_SLOTS)
