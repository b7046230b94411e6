"""Expressions that may not end in time, evaluated where they cannot stall the reader.

A job's ad is written by its user. The ClassAd language has no loops, but its regular
expressions backtrack: ``regexp("(a+)+$", "aaaa...a!")`` takes seconds per ad, and classad2
evaluates it holding the interpreter, where no timer can stop it. So an ad whose wanted
attributes need one of the regular-expression functions is evaluated in a worker process, one
ad at a time under a budget (:data:`BUDGET_S`, ``sources.evaluation_budget_s``); past it the
worker is killed and the ad is quarantined with that reason. Every other ad is evaluated in
place, as before: the worker costs a process start (once) and a round trip per ad that needs it.

Every path an ad comes by is guarded: ``-long`` text (:func:`evaluate_guarded`), and classad2
objects, from a live pool's answer or a ``-json`` dump (:func:`evaluate_ad`).
"""

from __future__ import annotations

import atexit
import contextlib
import pickle
import re
import select
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

import classad2

from probes.sources.classad_semantics import use_condor_functions

__all__ = [
    "BUDGET_S",
    "EvaluationTimeout",
    "Wanted",
    "calls_regexp",
    "configure",
    "evaluate",
    "evaluate_ad",
    "evaluate_guarded",
    "from_classad",
    "needs_guard",
]

Wanted = Sequence[tuple[str, tuple[str, ...]]]
"""Attributes to evaluate: (name, the names that shadow it). A shadowed attribute (one of those
names is present in the ad) is None, never evaluated."""

BUDGET_S = 0.25
"""Seconds an ad's guarded evaluation may take before it is quarantined."""

# the ClassAd functions that run a regular expression (matched on the ad's text, folded)
_REGEX_CALL = re.compile(
    r"\b(?:regexps?|regexpmember|stringlistregexpmember|replace|replaceall|splitusername)\s*\(", re.IGNORECASE
)
_REGEX_WORDS = ("regexp", "replace", "splitusername")  # one is in every name _REGEX_CALL matches

_START_S = 120.0  # a cold start on a loaded machine imports classad2 and the reader
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RUNTIME_NAMES = re.compile(r"eval", re.IGNORECASE)  # eval("Name"): a name built at run time


class EvaluationTimeout(Exception):
    """An ad's evaluation took longer than the budget."""


def configure(budget_s: float) -> None:
    """Set the budget of every later guarded evaluation (``sources.evaluation_budget_s``)."""
    global BUDGET_S
    if not budget_s > 0:
        raise ValueError(f"the evaluation budget must be a number of seconds > 0, got {budget_s!r}")
    BUDGET_S = float(budget_s)


def evaluate(ad: classad2.ClassAd, name: str) -> Any:
    """The value of attribute ``name`` of ``ad`` as classad2 evaluates it (None if absent or
    undefined); see :func:`from_classad`."""
    if name not in ad:
        return None
    return from_classad(ad.eval(name))


def from_classad(value: Any) -> Any:
    """classad2's value as a column takes it: ``undefined`` is None, lists element by element."""
    if value is classad2.Value.Undefined:
        return None
    if isinstance(value, list):
        return [from_classad(v) for v in value]
    return value


def needs_guard(text: str) -> bool:
    """Whether evaluating ``text`` (an ad, or the lines of one) may call a regular expression."""
    if "(" not in text:
        return False
    # Substrings first: on every ad of a live pool, the regular expression alone costs over ten
    # times what the substrings do a job ad. (A ClassAd function name is ASCII; lower() keeps it
    # found.)
    folded = text.lower()
    return any(word in folded for word in _REGEX_WORDS) and _REGEX_CALL.search(text) is not None


def calls_regexp(ad: classad2.ClassAd, names: Sequence[str]) -> bool:
    """Whether evaluating the attributes ``names`` of ``ad`` may call a regular expression: one
    is called in their expressions or in those of the attributes they reference, directly or
    not (any name in an expression's text counts as a reference: a superset, names in strings
    too), or an expression builds names at run time (``eval``) while the ad calls one anywhere."""
    todo = [n for n in names if n in ad]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        text = str(ad.lookup(name))
        if needs_guard(text) or (_RUNTIME_NAMES.search(text) and needs_guard(str(ad))):
            return True
        todo.extend(n for n in _NAME.findall(text) if n.lower() not in seen and n in ad)
    return False


def evaluate_ad(ad: classad2.ClassAd, wanted: Wanted, text: str | None = None) -> list[Any]:
    """The values of the attributes ``wanted`` of a classad2 ad (a live pool's, or one built
    from ``-json``), in order, as :func:`evaluate` gives them: here, or in the worker under the
    budget when one may call a regular expression (:func:`calls_regexp`). ``text`` is the ad's
    text in any syntax, when the caller has it: an ad whose text calls none is evaluated here
    without looking further. Raises :class:`EvaluationTimeout` past the budget, ``ValueError``
    if the worker fails."""
    unshadowed = [not any(u in ad for u in shadows) for _, shadows in wanted]
    names = [name for (name, _), read in zip(wanted, unshadowed, strict=True) if read]
    if (text is None or needs_guard(text)) and calls_regexp(ad, names):
        return _WORKER.ask(str(ad), True, list(wanted), BUDGET_S)  # str(ad): the new syntax, exactly
    return [evaluate(ad, name) if read else None for (name, _), read in zip(wanted, unshadowed, strict=True)]


def evaluate_guarded(text: str, wanted: Wanted) -> list[Any]:
    """Evaluate, in the worker, the attributes ``wanted`` of the ad ``text`` (``-long`` form);
    their values in order, as :func:`evaluate` gives them. Raises :class:`EvaluationTimeout`
    past the budget, ``ValueError`` if the worker cannot parse it."""
    return _WORKER.ask(text, False, list(wanted), BUDGET_S)


def _serve() -> None:  # pragma: no cover - runs in the worker process
    """The worker: read (text, new syntax?, wanted) pickles on stdin, write ("ok", values) or
    ("error", why)."""
    use_condor_functions()  # a process of its own: its first ad is parsed with HTCondor's functions too
    out = sys.stdout.buffer
    out.write(b"R")  # the imports are done: the budget counts evaluation only
    out.flush()
    while True:
        try:
            text, new, wanted = pickle.load(sys.stdin.buffer)
        except EOFError:
            return
        try:
            ad = classad2.parseOne(text, classad2.ParserType.New if new else classad2.ParserType.Old)
            values = [None if any(u in ad for u in shadows) else evaluate(ad, n) for n, shadows in wanted]
            pickle.dump(("ok", values), out)
        except Exception as exc:  # noqa: BLE001 - classad2's errors, sent back as text
            pickle.dump(("error", f"{type(exc).__name__}: {exc}"), out)
        out.flush()


class _Worker:
    """One worker process (``python -m probes.sources.sandbox``: it imports classad2 and
    nothing of the reader), started when first needed and again after a kill."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def ask(self, text: str, new: bool, wanted: list[tuple[str, tuple[str, ...]]], budget_s: float) -> list[Any]:
        with self._lock:
            process = self._start()
            assert process.stdin is not None and process.stdout is not None
            pickle.dump((text, new, wanted), process.stdin)
            process.stdin.flush()
            if not _readable(process.stdout, budget_s):
                self._kill()
                raise EvaluationTimeout(f"evaluation took longer than {budget_s:g} s")
            status, answer = pickle.load(process.stdout)
        if status != "ok":
            raise ValueError(answer)
        return list(answer)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            process = subprocess.Popen(
                [sys.executable, "-m", "probes.sources.sandbox"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            assert process.stdout is not None
            if not _readable(process.stdout, _START_S) or process.stdout.read(1) != b"R":
                process.kill()
                process.wait()
                raise RuntimeError(f"the expression worker did not start within {_START_S:g} s")
            self._process = process
        return self._process

    def close(self) -> None:
        """End the worker (its stdin closed, it exits), at the end of the process."""
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(5)
        self._kill()

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            for pipe in (self._process.stdin, self._process.stdout):
                if pipe is not None:
                    pipe.close()
        self._process = None


def _readable(pipe: Any, seconds: float) -> bool:
    ready, _, _ = select.select([pipe], [], [], seconds)
    return bool(ready)


_WORKER = _Worker()
atexit.register(_WORKER.close)

if __name__ == "__main__":  # pragma: no cover
    _serve()
