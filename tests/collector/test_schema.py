"""The field check over a batch, a column at a time, says exactly what a record at a time says."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from collector.schema import MAX_STRING_BYTES, field_types, record_fault, records_faults

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
