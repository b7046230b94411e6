"""The negotiator's accounting, read and set through the bindings' worker (the priority sync).

The one network call of the sync: :class:`NegotiatorLike` is what
:meth:`~probes.sources.bindings.Bindings.negotiator` returns (every call in a worker killed at
``pool.timeout_s``, as the collectors' queries), so the code on both sides of it is the code the
real path runs; a test may hand in a fake with the same methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pandas as pd

from probes.errors import SourceError
from probes.sources.bindings import BindingsError

__all__ = ["NEGOTIATOR_COLUMNS", "NegotiatorLike", "apply_plan", "negotiator_table", "read_negotiator"]

NEGOTIATOR_COLUMNS = (
    "submitter", "priority", "factor", "usage_s", "unweighted_usage_s", "resources_used", "weighted_resources_used",
    "real_priority",
)  # fmt: skip
"""One row per submitter (accounting groups left out): ``Name``, ``Priority`` (the effective
priority, what orders the negotiator's service), ``PriorityFactor``,
``WeightedAccumulatedUsage`` as ``usage_s``, ``AccumulatedUsage`` as ``unweighted_usage_s``,
``ResourcesUsed``..., as ``getPriorities`` gives them, and ``real_priority`` (``Priority /
PriorityFactor``: what ``setPriority`` sets)."""

_ATTRS = {
    "submitter": "Name", "priority": "Priority", "factor": "PriorityFactor", "usage_s": "WeightedAccumulatedUsage",
    "unweighted_usage_s": "AccumulatedUsage", "resources_used": "ResourcesUsed",
    "weighted_resources_used": "WeightedResourcesUsed",
}  # fmt: skip


class NegotiatorLike(Protocol):
    def getPriorities(self, rollup: bool = False) -> list[Any]: ...  # noqa: N802 - the bindings' names
    def setFactor(self, user: str, factor: float) -> None: ...  # noqa: N802
    def setUsage(self, user: str, usage: float) -> None: ...  # noqa: N802
    def setPriority(self, user: str, priority: float) -> None: ...  # noqa: N802


def negotiator_table(ads: Sequence[Any]) -> pd.DataFrame:
    """The submitters of ``getPriorities``' ads (:data:`NEGOTIATOR_COLUMNS`), by name."""
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
    """The negotiator's submitters now; a SourceError when it does not answer in time."""
    try:
        return negotiator_table(client.getPriorities(False))
    except BindingsError as exc:
        raise SourceError(f"the negotiator: {exc}") from None


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
