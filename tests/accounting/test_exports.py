"""The public surface of probes.accounting is listed once and cannot drift."""

from __future__ import annotations

from probes import accounting


def test_all_is_the_public_surface() -> None:
    assert accounting.__all__ == [
        "RESOURCES",
        "CanonicalUnit",
        "DemandOverlap",
        "FairsharePolicy",
        "FairshareResult",
        "Penalties",
        "PenaltyPolicy",
        "Target",
        "bill",
        "class_of_hosts",
        "compare_metrics",
        "decay_weights",
        "demand_overlap",
        "fairshare",
        "fits_idle",
        "fitting_pairs",
        "job_penalties",
        "job_usage",
        "machine_classes",
        "machines_table",
        "node_requests",
        "overhead_histogram",
        "pool_totals",
        "price_requests",
        "slot_phase",
        "true_overhead",
    ]
    for name in accounting.__all__:
        if name != "RESOURCES":
            assert getattr(accounting, name).__module__.startswith("probes.accounting."), name
    assert accounting.RESOURCES == ("cpus", "memory", "disk", "gpus")


def test_every_public_function_documents_its_columns() -> None:
    for name in (
        "true_overhead", "overhead_histogram", "slot_phase", "fits_idle", "demand_overlap", "bill",
        "machine_classes", "pool_totals", "class_of_hosts", "node_requests", "price_requests", "job_penalties",
        "compare_metrics", "job_usage", "fairshare",
    ):  # fmt: skip
        doc = getattr(accounting, name).__doc__ or ""
        assert "needs" in doc, name
