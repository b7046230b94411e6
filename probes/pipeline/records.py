"""Every record kind the probe writes, built here and only here.

========================  ==========================================================================
kind                      from
========================  ==========================================================================
``slot``                  a snapshot's slots with their true overhead, phase and idle-demand fit
``allocation``            a snapshot's bills, one per running job (dynamic slot)
``job``                   the jobs table of the history read past its checkpoint (with its penalty
                          usage where the probe priced it: :func:`with_penalty_usage`), every run
                          of a job included (``RUN_COLUMNS`` of :mod:`probes.sources.history`)
``fairshare``             the ledger's state at the end of a closed window, per credential
``fairness``              demand, allocation, served part and starvation per credential and bucket
``gap``                   a snapshot's nodes it did not bill: missing since the previous snapshot,
                          unheard (stale ads), or not observed at all (:mod:`probes.pipeline.gaps`)
``priority``              a priority sync (or restore): per credential, the negotiator's value before and after
========================  ==========================================================================

The schema of a document (ids, timestamps, ``kind``, ``probe``) is
:func:`collector.records.table_records`, the contract with every store and the collector. A
record is encoded once, here, straight from its table (:class:`~collector.encoded.Encoded`):
the outbox keeps those bytes and the store receives them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from collector.encoded import Encoded
from collector.records import table_docs, table_records
from probes.accounting.ledger import ledger_fairshare
from probes.config import ProbeConfig
from probes.pipeline.overhead import OverheadReport

__all__ = [
    "Records",
    "fairness_docs",
    "fairshare_docs",
    "gap_docs",
    "job_docs",
    "priority_docs",
    "snapshot_docs",
    "with_penalty_usage",
]

Records = dict[str, Encoded]
"""Records by kind, encoded, as the outbox commits them."""


def snapshot_docs(report: OverheadReport, *, idle_known: bool, probe: str) -> Records:
    """The ``slot`` records of a snapshot's accounting and its ``allocation`` records (bills).
    Without idle demand (``idle_known`` false) a slot record says nothing of it."""
    records: Records = {}
    if len(report.slots):
        slots = report.slots if idle_known else report.slots.drop(columns=["fits_idle"])
        records["slot"] = table_records("slot", slots, probe=probe)
        if len(report.bills):
            records["allocation"] = table_records("allocation", report.bills, probe=probe)
    return records


def with_penalty_usage(jobs: pd.DataFrame, priced: pd.DataFrame) -> pd.DataFrame:
    """``jobs`` with the ``penalty_usage`` and ``cpu_only_usage`` (PE-seconds) its job records
    carry, from ``priced``, the same jobs in the same order as
    :func:`~probes.accounting.penalty.job_penalties` gives them (``usage``, ``cpu_only``,
    ``speed_used``, ``walltime_s``); ``jobs`` as it is when they were not priced."""
    if not {"usage", "cpu_only", "speed_used"} <= set(priced.columns) or len(priced) != len(jobs):
        return jobs
    time_s = pd.to_numeric(priced["walltime_s"]).fillna(0.0).to_numpy() * priced["speed_used"].to_numpy(dtype=float)
    return jobs.assign(
        penalty_usage=priced["usage"].to_numpy(dtype=float),
        cpu_only_usage=time_s * priced["cpu_only"].to_numpy(dtype=float),
    )


def job_docs(jobs: pd.DataFrame | None, *, probe: str) -> Records:
    """The ``job`` records of the jobs read."""
    return {"job": table_records("job", jobs, probe=probe)} if jobs is not None and len(jobs) else {}


def fairshare_docs(rows: Sequence[Sequence[Any]], window_start: float, config: ProbeConfig, *, probe: str) -> Encoded:
    """The ``fairshare`` records of one closed window: each credential's usage in it and its
    fairshare state at the window's end (the ``depth`` windows up to it, decayed)."""
    cfg = config.fairshare
    result = ledger_fairshare(rows, window_start, config.fairshare_policy())
    creds = result.credentials
    frame = pd.DataFrame(
        {
            "pool": config.pool.name,
            "policy": cfg.metric,
            "type": creds["type"],
            "name": creds["name"],
            "window_start": float(window_start),
            "window_end": float(window_start + cfg.interval_s),
            "usage": creds["usage_0"],
            "total": float(result.windows["total"].iloc[0]),
            "decayed": creds["decayed"],
            "effective": creds["effective"],
            "target": creds["target"],
            "target_mode": creds["target_mode"],
            "priority": creds["priority"],
            "over_cap": creds["over_cap"],
            "off_target": creds["off_target"],
            "depth": cfg.depth,
            "decay": cfg.decay,
        }
    )
    return table_records("fairshare", frame, probe=probe)


def fairness_docs(shares: pd.DataFrame, buckets: pd.DataFrame, *, pool: str, probe: str) -> Records:
    """The ``fairness`` records of a table of shares (see
    :func:`probes.accounting.fairness.bucket_shares`), each with its bucket's Jain indices."""
    if not len(shares):
        return {}
    jain = buckets[["bucket_start", "jain_served", "jain_allocation"]]
    frame = shares.merge(jain, on="bucket_start", how="left").assign(pool=pool)
    return {"fairness": table_records("fairness", frame, probe=probe)}


def gap_docs(gaps: pd.DataFrame, *, probe: str) -> Records:
    """The ``gap`` records of a snapshot's gap rows (:func:`probes.pipeline.gaps.node_gaps`)."""
    return {"gap": table_records("gap", gaps, probe=probe)} if len(gaps) else {}


def priority_docs(
    plan: pd.DataFrame, applied: Sequence[str], *, pool: str, at: float, dry_run: bool, restore: bool, probe: str
) -> list[dict[str, Any]]:
    """The ``priority`` records of a sync (or a restore, ``restore``) at ``at``: one per row of
    its plan, the negotiator's value ``before`` and ``after`` it, ``applied`` when it was set."""
    frame = plan.assign(
        pool=pool,
        sync_at=float(at),
        action="restore" if restore else "sync",
        dry_run=dry_run,
        applied=plan["submitter"].isin(list(applied)),
    )
    return table_docs("priority", frame, probe=probe)
