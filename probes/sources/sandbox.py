"""Expressions that may not end in time, evaluated where they cannot stall the reader.

A job's ad is written by its user. The ClassAd language has no loops, but its regular
expressions backtrack: ``regexp("(a+)+$", "aaaa...a!")`` takes seconds per ad, and classad2
evaluates it holding the interpreter, where no timer can stop it. So an ad whose wanted
attributes need one of the regular-expression functions is evaluated in a worker process, one
ad at a time under a budget (:data:`BUDGET_S`, ``sources.evaluation_budget_s``); past it the
worker is killed and the ad is quarantined with that reason. Every other ad is evaluated in
place, as before: the worker costs a process start (once) and a round trip per ad that needs it.
"""

from __future__ import annotations

import atexit
import pickle
import re
import select
import subprocess
import sys
import threading
from typing import Any

import classad2

__all__ = ["BUDGET_S", "EvaluationTimeout", "configure", "evaluate", "evaluate_guarded", "from_classad", "needs_guard"]

BUDGET_S = 0.25
"""Seconds an ad's guarded evaluation may take before it is quarantined."""

# the ClassAd functions that run a regular expression (matched on the ad's text, folded)
_REGEX_CALL = re.compile(r"\b(?:regexps?|regexpmember|stringlistregexpmember|replace|replaceall|splitusername)\s*\(", re.I)


_START_S = 120.0  # a cold start on a loaded machine imports classad2 and the reader


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
    return "(" in text and _REGEX_CALL.search(text) is not None


def evaluate_guarded(text: str, wanted: list[tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    """Evaluate, in the worker, the attributes ``wanted`` (name, and the names that shadow it:
    a shadowed attribute is never evaluated) of the ad ``text`` (``-long`` form); their values
    as :func:`~probes.sources.classad.literals.from_classad` gives them. Raises
    :class:`EvaluationTimeout` past the budget, ``ValueError`` if the worker cannot parse it."""
    return _WORKER.ask(text, wanted, BUDGET_S)


def _serve() -> None:  # pragma: no cover - runs in the worker process
    """The worker: read (text, wanted) pickles on stdin, write ("ok", values) or ("error", why)."""
    out = sys.stdout.buffer
    out.write(b"R")  # the imports are done: the budget counts evaluation only
    out.flush()
    while True:
        try:
            text, wanted = pickle.load(sys.stdin.buffer)
        except EOFError:
            return
        try:
            ad = classad2.parseOne(text, classad2.ParserType.Old)
            values = {n: None if any(u in ad for u in shadows) else evaluate(ad, n) for n, shadows in wanted}
            pickle.dump(("ok", values), out)
        except Exception as exc:  # classad2's errors, sent back as text
            pickle.dump(("error", f"{type(exc).__name__}: {exc}"), out)
        out.flush()


class _Worker:
    """One worker process (``python -m probes.sources.sandbox``: it imports classad2 and
    nothing of the reader), started when first needed and again after a kill."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def ask(self, text: str, wanted: list[tuple[str, tuple[str, ...]]], budget_s: float) -> dict[str, Any]:
        with self._lock:
            process = self._start()
            assert process.stdin is not None and process.stdout is not None
            pickle.dump((text, wanted), process.stdin)
            process.stdin.flush()
            if not _readable(process.stdout, budget_s):
                self._kill()
                raise EvaluationTimeout(f"evaluation took longer than {budget_s:g} s")
            status, answer = pickle.load(process.stdout)
        if status != "ok":
            raise ValueError(answer)
        return dict(answer)

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
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                pass
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
