"""Progress bars of long work (a year summarized, a large export), shown only on a terminal:
services, CI and pipes stay quiet."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from tqdm import tqdm

__all__ = ["progress_bar", "progress_counter"]


@contextmanager
def progress_bar(total: int, what: str, *, stream: TextIO | None = None) -> Iterator[Callable[[int], None]]:
    """A callback that advances a bar of ``total`` steps labelled ``what`` on ``stream``
    (stderr), drawn only when that is a terminal."""
    out = stream if stream is not None else sys.stderr
    with tqdm(total=total, desc=what, unit="step", file=out, disable=not out.isatty(), leave=False) as bar:

        def advance(n: int) -> None:
            bar.update(n)

        yield advance


@contextmanager
def progress_counter(what: str, unit: str, *, stream: TextIO | None = None) -> Iterator[Callable[[str, int], None]]:
    """A callback ``(label, n)`` that counts ``n`` more ``unit`` on a bar labelled ``what``
    (and the label of the latest call, a schedd) on ``stream`` (stderr), drawn only when that is
    a terminal; for work whose total is not known in advance (a history backlog)."""
    out = stream if stream is not None else sys.stderr
    with tqdm(desc=what, unit=unit, file=out, disable=not out.isatty(), leave=False) as bar:

        def advance(label: str, n: int) -> None:
            bar.set_postfix_str(label, refresh=False)
            bar.update(n)

        yield advance
