"""One line on stderr while numba compiles the ClassAd scanner.

The scanner (:mod:`probes.sources.classad.kernel`) is compiled the first time it is used after
an install or an upgrade, 20-60 s with nothing else to show, and loaded from numba's on-disk
cache afterwards. numba announces a compilation (a ``numba:compile`` event) only when it found
nothing in that cache, so listening for it says exactly when the cache is cold, without
guessing from timers or from numba's cache files.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

from numba.core import event

__all__ = ["SCANNER_MODULES", "announce_compiling"]

SCANNER_MODULES = ("probes.sources.classad",)
"""Where the compiled functions of the ClassAd readers are defined (with their submodules)."""


@contextmanager
def announce_compiling(stream: TextIO | None = None, modules: Sequence[str] = SCANNER_MODULES) -> Iterator[None]:
    """While inside, write one line to ``stream`` (default: stderr) when numba starts compiling
    a function defined in ``modules``; nothing when everything comes from the cache."""
    listener = _Announcer(stream, tuple(modules))
    with event.install_listener("numba:compile", listener):
        yield


class _Announcer(event.Listener):
    """Speaks once: the scanner's functions compile one after the other, nested, and one line
    is enough."""

    def __init__(self, stream: TextIO | None, modules: tuple[str, ...]) -> None:
        self.stream, self.modules, self.said = stream, modules, False

    def on_start(self, event: event.Event) -> None:
        if self.said:
            return
        dispatcher = event.data["dispatcher"]
        module = getattr(dispatcher.py_func, "__module__", "") or ""
        if not any(module == m or module.startswith(m + ".") for m in self.modules):
            return
        self.said = True
        where = getattr(getattr(dispatcher, "stats", None), "cache_path", None)
        stream = self.stream or sys.stderr
        stream.write(
            "fairacct: compiling the ClassAd scanner once (about a minute; later runs load it from numba's cache"
            + (f" in {where}" if where else "")
            + ") ...\n"
        )
        stream.flush()

    def on_end(self, event: event.Event) -> None:
        pass
