"""The negotiator's accounting, read and set through the bindings' worker (the priority sync).

The one network call of the sync: :class:`NegotiatorLike` is what
:meth:`~probes.sources.bindings.Bindings.negotiator` returns (every call in a worker killed at
``pool.timeout_s``, as the collectors' queries), so the code on both sides of it is the code the
real path runs; a test may hand in a fake with the same methods.

Every submitter, or an error. The negotiator answers a priority query with one ClassAd: its
count ``NumSubmittors`` and, for each entry i = 1..NumSubmittors (submitters and accounting
groups), ``Name<i>``, ``Priority<i>``, ``PriorityFactor<i>``... (``condor_userprio -long
-legacy`` prints it). The htcondor2 wheel's ``Negotiator.getPriorities`` (25.14.1) splits it on
``(.*)(\\d+)``, which keeps only the index's last digit: entries 10 and up are folded into 1..9
under names like ``Name1`` and lost, so a pool of 25 submitters reads as 9 entries. Hence the
answer is read whole (:meth:`NegotiatorLike.priority_answer`), split here by the whole index
(:func:`submitter_ads`), and refused when it does not hold exactly NumSubmittors named entries.
The collector's ``Accounting`` ads are no substitute: the negotiator publishes them a few at a
time (15 of 26 a minute after 25 submitters appeared, on the 25.0.13 test pool) and they state no
count.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pandas as pd

from probes.errors import SourceError
from probes.sources.bindings import BindingsError

__all__ = [
    "NEGOTIATOR_COLUMNS", "NegotiatorLike", "apply_plan", "negotiator_table", "read_negotiator", "submitter_ads",
]  # fmt: skip

NEGOTIATOR_COLUMNS = (
    "submitter", "priority", "factor", "usage_s", "unweighted_usage_s", "resources_used", "weighted_resources_used",
    "real_priority",
)  # fmt: skip
"""One row per submitter (accounting groups left out): ``Name``, ``Priority`` (the effective
priority, what orders the negotiator's service), ``PriorityFactor``,
``WeightedAccumulatedUsage`` as ``usage_s``, ``AccumulatedUsage`` as ``unweighted_usage_s``,
``ResourcesUsed``..., as the negotiator's entries give them, and ``real_priority`` (``Priority /
PriorityFactor``: what ``setPriority`` sets)."""

_ATTRS = {
    "submitter": "Name", "priority": "Priority", "factor": "PriorityFactor", "usage_s": "WeightedAccumulatedUsage",
    "unweighted_usage_s": "AccumulatedUsage", "resources_used": "ResourcesUsed",
    "weighted_resources_used": "WeightedResourcesUsed",
}  # fmt: skip


# an entry's attribute: its name (which ends in a non-digit) and its whole index
_NUMBERED = re.compile(r"(.*\D)(\d+)")


class NegotiatorLike(Protocol):
    def priority_answer(self, rollup: bool = False) -> Mapping[str, Any]:
        """The negotiator's answer to a priority query whole (see the module docstring)."""

    def setFactor(self, user: str, factor: float) -> None: ...  # noqa: N802 - the bindings' names
    def setUsage(self, user: str, usage: float) -> None: ...  # noqa: N802
    def setPriority(self, user: str, priority: float) -> None: ...  # noqa: N802


def submitter_ads(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The entries of the negotiator's priority ``answer`` (``NumSubmittors``, ``Name<i>``,
    ``Priority<i>``, ... for i = 1..NumSubmittors), one dict of unnumbered attributes each, in
    the negotiator's order. A SourceError names what is wrong when the answer does not hold
    exactly its ``NumSubmittors`` entries, each with a ``Name``: a partial list of submitters
    would let a sync skip the others in silence."""
    count = answer.get("NumSubmittors")
    # type(), not isinstance: a ClassAd's undefined is classad2.Value.Undefined, an IntEnum of 2
    if type(count) is not int or count < 0:
        raise SourceError(
            f"the negotiator's priority answer: NumSubmittors is {count!r}, expected a count of its entries "
            "(is the negotiator older than the answer's format?)"
        )
    entries: dict[int, dict[str, Any]] = {}
    for key in answer:
        numbered = _NUMBERED.fullmatch(str(key))
        if numbered is not None:
            entries.setdefault(int(numbered.group(2)), {})[numbered.group(1)] = answer.get(key)
    named = sorted(i for i, entry in entries.items() if isinstance(entry.get("Name"), str))
    if named != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(named))
        beyond = sorted(set(entries) - set(range(1, count + 1)))
        raise SourceError(
            f"the negotiator's priority answer states NumSubmittors = {count} and holds {len(named)} named "
            f"entries (without a Name: {_indices(missing)}; beyond the count: {_indices(beyond)}): refusing a "
            "partial list of submitters"
        )
    return [entries[i] for i in named]


def _indices(indices: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in indices[:10])
    return "none" if not indices else shown + (f" and {len(indices) - 10} more" if len(indices) > 10 else "")


def negotiator_table(ads: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The submitters of the negotiator's entries (:func:`submitter_ads`) as
    :data:`NEGOTIATOR_COLUMNS`, by name."""
    rows = [
        {col: ad.get(attr) for col, attr in _ATTRS.items()}
        for ad in ads
        if not ad.get("IsAccountingGroup", False) and "@" in str(ad.get("Name", ""))
    ]
    frame = pd.DataFrame(rows, columns=list(NEGOTIATOR_COLUMNS))
    for col in NEGOTIATOR_COLUMNS[1:]:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    frame["real_priority"] = frame["priority"] / frame["factor"].where(frame["factor"] > 0)
    return frame.sort_values("submitter", kind="stable").reset_index(drop=True)


def read_negotiator(client: NegotiatorLike) -> pd.DataFrame:
    """Every submitter the negotiator has now; a SourceError when it does not answer in time,
    or its answer is not whole (:func:`submitter_ads`)."""
    try:
        answer = client.priority_answer(False)
    except BindingsError as exc:
        raise SourceError(f"the negotiator: {exc}") from None
    return negotiator_table(submitter_ads(answer))


def apply_plan(client: NegotiatorLike, plan: pd.DataFrame) -> list[str]:
    """Set the ``after`` value of each ``set`` row of ``plan``; the submitters set. A failure
    stops at the submitter it happened on (those before it are set) and raises SourceError."""
    done: list[str] = []
    for submitter, mode, value in plan.loc[plan["status"] == "set", ["submitter", "mode", "after"]].itertuples(
        index=False
    ):
        try:
            setter = {"factor": client.setFactor, "priority": client.setPriority, "usage": client.setUsage}[mode]
            setter(str(submitter), float(value))
        except BindingsError as exc:
            raise SourceError(
                f"the negotiator: setting {submitter} ({', '.join(done) or 'none'} set before): {exc}"
            ) from None
        done.append(str(submitter))
    return done
