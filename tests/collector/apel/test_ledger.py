"""The ledger's arithmetic, pure: what a re-send cancels, and what it refuses (issue 49)."""

from __future__ import annotations

from typing import Any

import pytest

from collector.apel.grouping import ApelOptions, latest_end
from collector.apel.identity import parse_fqan
from collector.apel.ledger import ledger_entry, plan, zero_records
from collector.errors import ConfigError


def summary(site: str, dn: str, jobs: int = 1) -> dict[str, Any]:
    return {
        "Site": site, "Month": 10, "Year": 2026, "GlobalUserName": dn, "VO": "cms", "VOGroup": None, "VORole": None,
        "SubmitHost": "ce1.example", "Infrastructure": "grid", "NodeCount": 1, "Processors": 1,
        "WallDuration": 100.0 * jobs, "CpuDuration": 50.0, "NormalisedWallDuration": 1000.0,
        "NormalisedCpuDuration": 500.0, "NumberOfJobs": jobs,
    }  # fmt: skip


def test_a_site_re_spelled_replaces_its_month_and_zeroes_only_what_is_gone() -> None:
    ledger = {"T2_US_Nebraska 2026-10": ledger_entry("summary", [summary("T2_US_Nebraska", "/CN=a"),
                                                                  summary("T2_US_Nebraska", "/CN=b")])}  # fmt: skip
    now = {"T2_US_NEBRASKA 2026-10": [summary("T2_US_NEBRASKA", "/CN=A", 3)]}
    done = plan("summary", now, ["2026-10"], ledger)
    [(key, records)] = done.records.items()
    assert key == ("summary", "T2_US_NEBRASKA 2026-10")
    # /CN=A is /CN=a to APEL: replaced; /CN=b is gone: zeroed, spelled with this send's site
    assert [(r["Site"], r["GlobalUserName"], r["NumberOfJobs"]) for r in records] == [
        ("T2_US_NEBRASKA", "/CN=A", 3), ("T2_US_NEBRASKA", "/CN=b", 0),
    ]  # fmt: skip
    assert done.dropped == ["T2_US_Nebraska 2026-10"] and list(done.entries) == ["T2_US_NEBRASKA 2026-10"]


def test_a_key_apel_could_never_have_taken_is_not_zeroed() -> None:
    sent = [summary("T2_A", "/CN=Ada 100%% Effort"), summary("T2_A", "/CN=b")]
    assert [r["GlobalUserName"] for r in zero_records(sent, [])] == ["/CN=b"]


def test_sync_records_are_ledgered_and_zeroed_when_a_month_empties() -> None:
    first = plan("sync", {"T2_E 2026-10": [{"Site": "T2_E", "SubmitHost": "ce1", "NumberOfJobs": 3, "Month": 10,
                                            "Year": 2026}]}, ["2026-10"], {})  # fmt: skip
    again = plan("sync", {}, ["2026-10"], first.entries)
    assert again.records == {
        ("sync", "T2_E 2026-10"): [{"Site": "T2_E", "SubmitHost": "ce1", "NumberOfJobs": 0, "Month": 10, "Year": 2026}]
    }
    assert again.zeroed == 1


def test_the_jobs_kind_refuses_what_apel_cannot_correct() -> None:
    job = {"Site": "T2_J", "LocalJobId": "ce#1.0#1", "EndTime": 1_791_331_200, "VO": "cms", "SubmitHost": "ce",
           "InfrastructureType": "grid", "ServiceLevelType": "HEPSPEC", "ServiceLevel": 10.123}  # fmt: skip
    sent = plan("jobs", {"T2_J 2026-10": [job]}, ["2026-10"], {}).entries
    assert plan("jobs", {"T2_J 2026-10": [job | {"LocalJobId": "CE#1.0#1"}]}, ["2026-10"], sent).records
    with pytest.raises(ConfigError, match="cannot remove one"):
        plan("jobs", {"T2_J 2026-10": [job | {"EndTime": 1_791_331_201}]}, ["2026-10"], sent)
    with pytest.raises(ConfigError, match="never removes such a summary"):  # its summary row would stay
        plan("jobs", {"T2_J 2026-10": [job | {"VO": "atlas"}]}, ["2026-10"], sent)
    with pytest.raises(ConfigError, match="was sent to APEL as --kind jobs"):
        plan("summary", {"T2_J 2026-10": [summary("T2_J", "/CN=a")]}, ["2026-10"], sent, switch=True)


@pytest.mark.parametrize(
    ("fqan", "expected"),
    [
        ("/cms/Role=pilot/Capability=NULL", ("cms", "/cms", "Role=pilot")),
        ("/cms/role=pilot", ("cms", "/cms", "role=pilot")),
        ("/cms/Capability=NULL", ("cms", "/cms/Capability=NULL", None)),
        ("/atlas/usatlas/Role=production;/atlas", ("atlas", "/atlas/usatlas", "Role=production")),
        ("/cms/Role=NULL", ("cms", "/cms", "Role=NULL")),
        ("cms", (None, None, None)),
    ],
)
def test_fqans_read_as_apels_parse_fqan(fqan: str, expected: tuple[str | None, ...]) -> None:
    assert parse_fqan(fqan) == expected


def test_a_job_is_sent_up_to_a_day_ahead_of_the_clock_never_in_a_month_not_begun() -> None:
    mid, eve = 1_791_331_200.0, 1_793_487_600.0  # 2026-10-07T00:00Z, 2026-10-31T23:00Z
    assert latest_end(ApelOptions(now=mid)) == mid + 86400
    assert latest_end(ApelOptions(now=eve)) < 1_793_491_200  # 2026-11-01T00:00Z: APEL would refuse November
