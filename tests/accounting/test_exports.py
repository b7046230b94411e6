"""The accounting functions document the columns they need (the surface itself is checked in tests/test_exports.py)."""

from __future__ import annotations

from probes import accounting


def test_every_public_function_documents_its_columns() -> None:
    for name in (
        "true_overhead", "overhead_histogram", "slot_phase", "fits_idle", "demand_overlap", "bill",
        "machine_classes", "pool_totals", "class_of_hosts", "node_requests", "price_requests", "job_penalties",
        "compare_metrics", "job_usage", "fairshare", "slot_sums", "job_sums", "efficiency_table", "drift_loss",
        "drift_by", "bucket_shares", "fairness_by_bucket", "starvation_intervals",
    ):  # fmt: skip
        doc = getattr(accounting, name).__doc__ or ""
        assert "needs" in doc, name
