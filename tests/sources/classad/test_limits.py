"""The range limits are looked for in one pass over a chunk's whole table, and each attribute's
column only on a hit: every rare form is still caught, on its smallest input."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probes.sources.classad import Attr, Kind
from probes.sources.classad.limits import AMOUNT, out_of_range
from probes.sources.history import read_history

_LIMITS = [Attr("Unlimited", Kind.NUMBER), Attr("Amount", Kind.NUMBER, limits=AMOUNT)]


def _job(cluster: int, memory: str) -> str:
    return (
        f'GlobalJobId = "s#{cluster}.0#1"\nClusterId = {cluster}\nProcId = 0\nJobStatus = 4\n'
        f"MemoryProvisioned = {memory}\n"
    )


def test_an_amount_at_its_excluded_bound_quarantines_its_ad_among_good_ones(tmp_path: Path) -> None:
    """2^53 MiB is the first amount out of range ([0, 2^53)): its ad alone is quarantined, the
    one just below it and the others of the same chunk are read."""
    history = tmp_path / "history.ads"
    history.write_text("\n".join([_job(1, "2048"), _job(2, "9007199254740992"), _job(3, "9007199254740991")]))
    jobs, report = read_history([history])
    assert jobs["cluster"].tolist() == [1, 3]
    assert jobs["memory"].tolist() == [2048.0, 9007199254740991.0]
    (bad,) = report.malformed
    assert bad.line == 7 and bad.reason == (
        "attribute 'MemoryProvisioned' = 9007199254740992: expected a number from 0 to below 9007199254740992; "
        "the ad was skipped"
    )


def test_an_infinity_where_there_is_no_limit_is_not_out_of_range() -> None:
    """An unlimited attribute's infinity is a hit of the whole-table pass, which the exact pass
    then clears (drop_infinities counts it instead)."""
    numeric = np.array([[np.inf, 1.0], [-np.inf, np.nan]])
    assert out_of_range(numeric, _LIMITS) == {}


def test_only_the_ad_out_of_range_is_named_with_its_first_attribute() -> None:
    numeric = np.array([[np.nan, 1.0], [5.0, -0.5], [np.inf, 2.0**53]])
    assert out_of_range(numeric, _LIMITS) == {
        1: "attribute 'Amount' = -0.5: expected a number from 0 to below 9007199254740992; the ad was skipped",
        2: "attribute 'Amount' = 9007199254740992: expected a number from 0 to below 9007199254740992; "
        "the ad was skipped",
    }


def test_a_finite_attribute_that_is_not_a_number_is_caught_with_nothing_out_of_range() -> None:
    """No value outside a limit in the whole table: an attribute that must be finite, present
    and not a number, still makes its ad malformed."""
    attrs = [Attr("Cpus", Kind.NUMBER, limits=AMOUNT, finite=True)]
    numeric = np.array([[4.0], [np.nan]])
    present = np.array([[True], [True]])
    reasons = out_of_range(numeric, attrs, present, lambda ad, j: "error")
    assert list(reasons) == [1] and reasons[1].startswith("attribute 'Cpus' = error: expected a finite number")
