"""Values out of range make an ad malformed: a negative, or absurdly large, amount of a resource
or time cannot be accounted, and one such ad must not stop a table (issue 29: a job with
``CpusProvisioned = -1`` made every cycle fail on it). The readers quarantine the ad and read on.

The limits are half-open ranges ``[low, high)`` on :class:`~probes.sources.classad.model.Attr`;
a missing value (NaN) is never out of range, and a non-finite one is made missing and counted
by :func:`~probes.sources.classad.literals.drop_infinities` -- except in an attribute that must
be a finite number (:attr:`~probes.sources.classad.model.Attr.finite`): there a value present
that is not one (``undefined``, ``error``, a string, an infinity) makes the ad malformed as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from probes.sources.classad.model import Attr
from probes.sources.values import not_plain

__all__ = ["AMOUNT", "INSTANT", "MAX_OPERATORS", "out_of_range", "too_many_operators"]

#: An amount of a resource (cores, MiB, KiB, devices, hosts) or a duration (seconds): not below
#: nothing, and exact in a float64 (2^53: no pool nor job comes near it).
AMOUNT = (0.0, 2.0**53)
#: An instant (UNIX seconds) or an id: exact in a float64, either side of zero (``-1`` stands for
#: "never" in some attributes).
INSTANT = (-(2.0**53), 2.0**53)


MAX_OPERATORS = 16_384
"""The most operators one value may hold to be handed to classad2, which parses, evaluates,
prints and frees an expression by recursion over its tree: a chain of 35,000 ``+`` overflows its
8 MiB stack (a signal, not an exception; 450 already fail to evaluate, which the readers
quarantine). A real ``Requirements`` or ``START`` of a few thousand terms is well within it."""

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_OPERATOR = re.compile(r"=\?=|=!=|==|!=|<=|>=|&&|\|\||>>>|<<|>>|[-+*/%&|^<>!?:~]")


def too_many_operators(text: str) -> str | None:
    """Why ``text`` (an ad's ``Name = value`` lines, or one expression) must not reach classad2:
    a line of more than :data:`MAX_OPERATORS` operators outside its string literals, named with
    its attribute; None when none has. A line shorter than the bound is not looked into."""
    for line in text.split("\n"):
        if len(line) <= MAX_OPERATORS:
            continue
        n = len(_OPERATOR.findall(_STRING.sub('""', line)))
        if n > MAX_OPERATORS:
            name = line.partition("=")[0].strip()[:60] if "=" in line else "(an expression)"
            return (
                f"attribute '{name}' holds an expression of {n} operators, more than the {MAX_OPERATORS} "
                "classad2 can evaluate without overflowing its stack; the ad was skipped"
            )
    return None


def out_of_range(
    numeric: np.ndarray,
    attrs: Sequence[Attr],
    present: np.ndarray | None = None,
    shown: Callable[[int, int], str] | None = None,
) -> dict[int, str]:
    """The ads (rows of ``numeric``, ads x ``attrs``) holding a value outside its attribute's
    limits, each with why (its first such attribute, named with its value and range).

    ``present`` (ads x ``attrs``, bool): where each attribute is present (and read); with it, a
    :attr:`~Attr.finite` attribute present but not a finite number (NaN or infinite in
    ``numeric``) is out of range too, its value named by ``shown(ad, attribute)`` (its text)."""
    reasons: dict[int, str] = {}
    # A value outside its limits is rare: one pass over the whole table says whether any is, and
    # only then is each attribute's column looked at (on every chunk, that made the check cost
    # on every ad). An unlimited attribute has (-inf, inf): an infinity anywhere is a hit, and the
    # exact pass decides.
    lows = np.array([a.limits[0] if a.limits else -np.inf for a in attrs])
    highs = np.array([a.limits[1] if a.limits else np.inf for a in attrs])
    with np.errstate(invalid="ignore"):  # NaN compares false: missing is not out of range
        hit = bool(((numeric < lows) | (numeric >= highs)).any())
    # So is a finite attribute present but no finite number: one pass over those columns says
    # whether any is (a job has 18 of them, a pass each cost more than the check's whole point).
    not_finite = False
    if present is not None and (finite := [j for j, a in enumerate(attrs) if a.finite]):
        not_finite = bool((present[:, finite] & ~np.isfinite(numeric[:, finite])).any())
    if not hit and not not_finite:
        return reasons
    for j, a in enumerate(attrs):
        column = numeric[:, j]
        if a.finite and present is not None:
            unknown = np.flatnonzero(present[:, j] & ~np.isfinite(column))
            low, high = a.limits or (-np.inf, np.inf)
            for i in unknown.tolist():
                if i not in reasons:
                    got = shown(i, j) if shown is not None else f"{column[i]!r}"
                    why = not_plain(got)  # 8 GB, 0x10: say why it is no number
                    within = f" from {low:.17g} to below {high:.17g}" if a.limits else ""
                    reasons[i] = (
                        f"attribute '{a.name}' = {_excerpt(got)}: expected a finite number{within}"
                        f"{f' ({why})' if why else ''}; the ad was skipped"
                    )
        if a.limits is None or not hit:
            continue
        low_j, high_j = a.limits
        with np.errstate(invalid="ignore"):  # NaN compares false: missing is not out of range
            bad = np.flatnonzero(((column < low_j) | (column >= high_j)) & np.isfinite(column))
        for i in bad.tolist():
            if i not in reasons:
                reasons[i] = (
                    f"attribute '{a.name}' = {column[i]:.17g}: expected a number from {low_j:.17g} "
                    f"to below {high_j:.17g}; the ad was skipped"
                )
    return reasons


def _excerpt(text: str, limit: int = 80) -> str:
    """A value's text as a message quotes it: one line, at most ``limit`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else f"{one[:limit]}... ({len(one)} characters)"
