"""The public surface of probes.accounting is listed once and cannot drift."""

from __future__ import annotations

from probes import accounting


def test_all_is_the_public_surface() -> None:
    assert accounting.__all__ == [
        "RESOURCES",
        "CanonicalUnit",
        "DemandOverlap",
        "bill",
        "demand_overlap",
        "fits_idle",
        "fitting_pairs",
        "overhead_histogram",
        "slot_phase",
        "true_overhead",
    ]
    for name in accounting.__all__:
        if name != "RESOURCES":
            assert getattr(accounting, name).__module__.startswith("probes.accounting."), name
    assert accounting.RESOURCES == ("cpus", "memory", "disk", "gpus")


def test_every_public_function_documents_its_columns() -> None:
    for name in ("true_overhead", "overhead_histogram", "slot_phase", "fits_idle", "demand_overlap", "bill"):
        doc = getattr(accounting, name).__doc__ or ""
        assert "needs" in doc, name
