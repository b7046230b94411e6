"""The field check over a batch, a column at a time, says exactly what a record at a time says."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from collector.schema import MAX_STRING_BYTES, field_types, record_fault, records_faults, utc_times

NAMES = ["cpus", "user", "end", "end_iso", "provisioned", "exit_code", "Extra", "_bad", "a.b"]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["alice", "2026-11-21T14:00:00Z", "yesterday", "x" * (MAX_STRING_BYTES + 1)]),
    st.lists(st.integers(), max_size=2),
)
RECORDS = st.lists(st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=6), max_size=12)


@settings(max_examples=300, deadline=None)
@given(RECORDS)
def test_a_batch_is_judged_as_its_records_one_by_one(docs: list[dict[str, Any]]) -> None:
    one_by_one = {i: r for i, d in enumerate(docs) if (r := record_fault("job", d)) is not None}
    assert records_faults("job", docs) == one_by_one


def test_the_types_come_from_the_index_template() -> None:
    types = field_types("job")
    assert (types["cpus"], types["end"], types["end_iso"], types["exit_code"]) == ("double", "long", "date", "integer")
    assert record_fault("job", {"exit_code": 2**31}) == (
        "field 'exit_code': expected a whole number from -2147483648 to 2147483647, got 2147483648"
    )
    assert record_fault("job", {"end": 1.5e19}) == (
        "field 'end': expected a whole number from -9223372036854775808 to 9223372036854775807, got 1.5e+19"
    )
    assert record_fault("job", {"cpus": 2.5, "end": 1795269600.0, "user": "alice", "Extra": [1]}) == (
        "field 'Extra': expected a scalar (records are flat: no arrays or objects), got [1]"
    )


def test_times_are_checked_and_written_in_one_form() -> None:
    """A date field, or an extra ``*_iso`` one (a date to the index templates), takes an ISO-8601
    time with a UTC offset, then kept in UTC to the second."""
    doc: dict[str, Any] = {"end_iso": "20251231T000000Z", "benchmarked_iso": "2025-12-31T14:00:00+14:00", "n": 1}
    assert records_faults("job", [doc] * 5) == {} and record_fault("job", doc) is None
    utc_times("job", doc)
    assert doc == {"end_iso": "2025-12-31T00:00:00Z", "benchmarked_iso": "2025-12-31T00:00:00Z", "n": 1}
    assert record_fault("job", {"benchmarked_iso": "2025-12-31"}) == (
        "field 'benchmarked_iso': expected an ISO-8601 time with a UTC offset like '2026-11-21T14:00:00Z', "
        "got '2025-12-31'"
    )


def test_a_batch_of_distinct_names_is_judged_a_record_at_a_time() -> None:
    """Records that share no shape (every name distinct) are each checked alone: the same
    answers as one by one, in time linear in their fields."""
    docs = [{f"F{i}_{j}": j for j in range(200)} for i in range(50)]
    docs[7] = {**docs[7], "F7_3": [1]}
    docs[9] = {f"F{j}": j for j in range(300)}
    assert records_faults("job", docs) == {
        7: "field 'F7_3': expected a scalar (records are flat: no arrays or objects), got [1]",
        9: "a record has at most 256 fields (collector.max_fields_per_record), this one 300",
    }
    assert records_faults("job", docs, max_fields=100)[0].startswith("a record has at most 100 fields")


def test_a_number_too_large_to_sum_is_refused() -> None:
    """Issue 54, point 12: two walltimes of 1.5e308 are finite, and their sum is not; a double (or
    a number in a field the templates do not name) is at most 2^63 in magnitude, as a long is."""
    too_large = "expected a number of magnitude at most 2^63 (9.223e+18: the summaries' sums of larger ones overflow)"
    assert record_fault("job", {"walltime_s": 1.5e308}) == f"field 'walltime_s': {too_large}, got 1.5e+308"
    assert record_fault("job", {"cpus": -1e19}) == f"field 'cpus': {too_large}, got -1e+19"
    assert record_fault("job", {"Extra": 9.3e18}) == f"field 'Extra': {too_large}, got 9.3e+18"
    assert record_fault("job", {"walltime_s": 2.0**63, "cpus": -(2.0**63), "Extra": 2**63 - 1}) is None
    same = [{"id": f"j{i}", "walltime_s": 3600.0} for i in range(5)]
    same[3]["walltime_s"] = 1.5e308  # checked a column at a time: the column fails, the record is found
    assert records_faults("job", same) == {3: f"field 'walltime_s': {too_large}, got 1.5e+308"}
