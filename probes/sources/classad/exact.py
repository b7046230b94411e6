"""The exact path of the ``-long`` reader: an ad the fast scan cannot read whole (an expression,
an unusual spelling, a line not in HTCondor's canonical ``Name = value`` form) is handed to
``classad2`` in the context of its own ad, so its values are by construction the ones
``classad2`` gives; an ad it cannot parse is quarantined with the line it refuses and why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import classad2
import numpy as np

from probes.sources.classad.literals import evaluate
from probes.sources.classad.model import Attr
from probes.sources.classad_semantics import use_condor_functions
from probes.sources.report import Malformed, ReadTally
from probes.sources.sandbox import EvaluationTimeout, evaluate_guarded, needs_guard

__all__ = ["evaluate_ad"]


def evaluate_ad(
    attrs: Sequence[Attr],
    text: str,
    path: str,
    line: int,
    truncated: bool,
    deferred: np.ndarray,
    whole: bool,
    tally: ReadTally,
) -> dict[int, Any] | None:
    """Evaluate an ad's wanted attributes with classad2; None (and the ad in ``tally``) if malformed."""
    if truncated:
        tally.add_malformed(Malformed(path, line, "truncated: the file ends in the middle of this ad", text))
        return None
    use_condor_functions()  # before the ad or its part is parsed: HTCondor's functions bound in it
    guard = needs_guard(text)  # a regular expression may backtrack for minutes: not in this process
    if not whole and not guard:
        values = _evaluate_part(attrs, text, deferred)
        if values is not None:
            return values
    ads = list(classad2.parseAds(text, classad2.ParserType.Old))
    # classad2 drops an ad it cannot parse, or silently keeps only the lines before the
    # first bad one: every attribute of the text must be in what it parsed. As many
    # attributes as lines proves it; only an ad that repeats a name needs the names compared.
    if len(ads) != 1 or (len(ads[0]) != text.count("\n") and _names(text) - {k.lower() for k in ads[0]}):
        offset, reason = _diagnose(text)
        tally.add_malformed(Malformed(path, line + offset, reason, text))
        return None
    ad = ads[0]
    if guard:
        return _evaluate_guarded(attrs, text, path, line, deferred, whole, tally)
    if not whole:
        return {int(j): evaluate(ad, attrs[j].name) for j in np.flatnonzero(deferred).tolist()}
    # every attribute, as classad2 sees the ad: one behind a present attribute is not read
    return {j: None if any(u in ad for u in a.shadows) else evaluate(ad, a.name) for j, a in enumerate(attrs)}


def _evaluate_guarded(
    attrs: Sequence[Attr], text: str, path: str, line: int, deferred: np.ndarray, whole: bool, tally: ReadTally
) -> dict[int, Any] | None:
    """:func:`evaluate_ad` of an ad that calls a regular expression, in the sandbox's worker
    under its budget; None (and the ad quarantined) past it."""
    rows = range(len(attrs)) if whole else [int(j) for j in np.flatnonzero(deferred)]
    wanted = [(attrs[j].name, attrs[j].shadows if whole else ()) for j in rows]
    try:
        values = evaluate_guarded(text, wanted)
    except EvaluationTimeout as exc:
        reason = f"{exc} (a regular expression that backtracks?); the ad was skipped"
        tally.add_malformed(Malformed(path, line, reason, text))
        return None
    return dict(zip(rows, values, strict=True))


def _evaluate_part(attrs: Sequence[Attr], text: str, deferred: np.ndarray) -> dict[int, Any] | None:
    """Evaluate the deferred attributes of a canonical ad in a classad2 ad of only the lines
    they reference, directly or through other attributes: an expression's value depends on
    nothing else, and parsing a few lines instead of a whole job ad is most of the cost.

    Any name in an expression's text counts as a reference (a superset: names in strings
    too). None, and the whole ad is parsed, when an expression builds names at run time
    (``eval``), or when classad2 does not keep every line of the part (a bad value)."""
    if not text.isascii():
        return None  # folding case could move the lines of the folded text
    folded = "\n" + text.lower()
    todo = [attrs[j].name.lower() for j in np.flatnonzero(deferred).tolist()]
    part: dict[str, str] = {}
    while todo:
        name = todo.pop()
        if name in part:
            continue
        at = folded.rfind("\n" + name + " = ")  # values hold no newline: a line start; the last wins
        if at < 0:
            continue
        line = text[at : text.find("\n", at)]
        part[name] = line
        value = line[len(name) + 3 :]
        if _RUNTIME_NAMES.search(value):
            return None
        todo.extend(w.lower() for w in _NAME.findall(value))
    ads = list(classad2.parseAds("\n".join(part.values()) + "\n", classad2.ParserType.Old))
    if len(ads) != 1 or len(ads[0]) != len(part):
        return None
    return {int(j): evaluate(ads[0], attrs[j].name) for j in np.flatnonzero(deferred).tolist()}


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_RUNTIME_NAMES = re.compile(r"eval", re.IGNORECASE)  # eval("Name"), evalInEachContext(...)


def _names(text: str) -> set[str]:
    """The attribute names of an ad's text, case-folded: not its comment lines (``#``), which
    classad2 skips."""
    lines = (ln.strip() for ln in text.split("\n"))
    return {ln.partition("=")[0].strip().lower() for ln in lines if ln and not ln.startswith("#")}


def _diagnose(text: str) -> tuple[int, str]:
    """Say which line of a malformed ad classad2 refuses, and why if it is plain to see."""
    for offset, line in enumerate(text.split("\n")):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if not eq or not name.strip():
            return offset, f"expected 'Name = value', got {line[:60]!r}"
        if not list(classad2.parseAds(line + "\n", classad2.ParserType.Old)):
            attr = name.strip()
            if value.count('"') - value.count('\\"') % 2 == 1 or value.count('"') % 2 == 1:
                return offset, f"unterminated string in attribute '{attr}'"
            if not value.strip():
                return offset, f"attribute '{attr}' has no value"
            return offset, f"attribute '{attr}': cannot parse the value {value.strip()[:60]!r}"
    return 0, "classad2 cannot parse this ad"
