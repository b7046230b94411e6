"""The negotiator's priority answer split into its entries: every entry, by its whole index, or
an error naming what is missing; never the subset the htcondor2 wheel's ``getPriorities``
gives (its entries 1..9)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import classad2
import htcondor2._negotiator
import pytest

from probes.errors import SourceError
from probes.sources.bindings import BindingsError, _priority_answer
from probes.sources.negotiator import read_negotiator, submitter_ads

# 25 submitters and the group <none>, numbered as the 25.0.13 negotiator numbers them
NAMES = ["<none>", *(f"u{i:02d}@personal.pool" for i in range(25))]


def entry(i: int, name: str) -> dict[str, Any]:
    """Entry ``i`` (1-based) of ``name``: its factor 100 x i, its effective priority 0.5 x that."""
    return {
        "Name": name,
        "IsAccountingGroup": name == "<none>",
        "PriorityFactor": 100.0 * i,
        "Priority": 50.0 * i,
        "WeightedAccumulatedUsage": float(i),
    }


def answer(entries: list[dict[str, Any]], count: Any) -> classad2.ClassAd:
    """The negotiator's answer: ``NumSubmittors`` = ``count`` and the entries numbered from 1."""
    ad = classad2.ClassAd({"LastUpdate": 1795841446, "NumSubmittors": count})
    for i, attrs in enumerate(entries, start=1):
        ad.update({f"{attr}{i}": value for attr, value in attrs.items()})
    return ad


WHOLE = [entry(i, name) for i, name in enumerate(NAMES, start=1)]


def test_every_entry_is_read_by_its_whole_index() -> None:
    ads = submitter_ads(answer(WHOLE, 26))
    assert [a["Name"] for a in ads] == NAMES
    # entry 12 is u10's own, not entry 1's or 2's (what a one-digit index would mix up)
    assert ads[11] == entry(12, "u10@personal.pool")
    assert ads == WHOLE


def test_the_wheels_getpriorities_split_keeps_nine_entries() -> None:
    """Why fairacct reads the answer whole: htcondor2 25.14.1 splits it on (.*)(\\d+), so that
    Name12 is attribute Name1 of entry 2; a wheel that fixes it makes this test fail, and the
    workaround can go."""
    split = list(htcondor2._negotiator._convert_numbered_attributes_to_list_of_ads(answer(WHOLE, 26)))
    assert sorted(a["Name"] for a in split if "Name" in a) == sorted(NAMES[:9])
    assert split[1]["Name1"] == NAMES[11]


@pytest.mark.parametrize(
    ("ad", "match"),
    [
        # what getPriorities keeps of 26 entries
        (
            answer(WHOLE[:9], 26),
            r"NumSubmittors = 26 and holds 9 named entries \(without a Name: 10, 11, .* and 7 more",
        ),
        (answer(WHOLE[:25], 26), r"NumSubmittors = 26 and holds 25 named entries \(without a Name: 26;"),
        (answer(WHOLE, 25), r"NumSubmittors = 25 and holds 26 named entries \(without a Name: none; beyond the co"),
        (answer([*WHOLE[:1], {"Priority": 1.0}, *WHOLE[2:]], 26), r"without a Name: 2;"),
        (answer(WHOLE, None), r"NumSubmittors is <Value.Undefined: 2>, expected a count"),
        (classad2.ClassAd({f"Name{i}": n for i, n in enumerate(NAMES, start=1)}), r"NumSubmittors is None"),
        (answer(WHOLE, "26"), r"NumSubmittors is '26'"),
        (answer(WHOLE, -1), r"NumSubmittors is -1"),
    ],
)
def test_an_answer_that_is_not_whole_is_an_error(ad: classad2.ClassAd, match: str) -> None:
    with pytest.raises(SourceError, match=match):
        submitter_ads(ad)


def test_no_submitters_is_an_empty_table() -> None:
    assert submitter_ads(answer([], 0)) == []


class Negotiator:
    def __init__(self, reply: Mapping[str, Any] | Exception) -> None:
        self.reply = reply

    def priority_answer(self, rollup: bool = False) -> Mapping[str, Any]:
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply

    def setFactor(self, user: str, factor: float) -> None: ...  # noqa: N802 - the bindings' names
    def setUsage(self, user: str, usage: float) -> None: ...  # noqa: N802
    def setPriority(self, user: str, priority: float) -> None: ...  # noqa: N802


def test_read_negotiator_gives_every_submitter_or_raises() -> None:
    table = read_negotiator(Negotiator(answer(WHOLE, 26)))
    assert table["submitter"].tolist() == sorted(NAMES[1:])  # the group <none> left out
    u24 = table[table["submitter"] == "u24@personal.pool"].iloc[0]  # entry 26
    assert (u24["factor"], u24["priority"], u24["usage_s"]) == (2600.0, 1300.0, 26.0)
    with pytest.raises(SourceError, match=r"NumSubmittors = 26 and holds 9 named entries"):
        read_negotiator(Negotiator(answer(WHOLE[:9], 26)))
    with pytest.raises(SourceError, match=r"the negotiator: no answer within 20 s"):
        read_negotiator(Negotiator(BindingsError("no answer within 20 s (pool.timeout_s)")))


def test_a_wheel_without_the_whole_answer_is_an_error_not_getpriorities(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker falls back on nothing: getPriorities would be the silent subset."""
    monkeypatch.delattr(htcondor2.htcondor2_impl, "_negotiator_command_return")
    with pytest.raises(RuntimeError, match=r"cannot read the negotiator's priority answer whole"):
        _priority_answer(htcondor2.Negotiator(classad2.ClassAd({"MyAddress": "<127.0.0.1:9>"})), rollup=False)
