"""One line on stderr while numba compiles the ClassAd scanner.

The scanner (:mod:`probes.sources.classad.kernel`) is compiled the first time it is used after
an install or an upgrade, 20-60 s with nothing else to show, and loaded from numba's on-disk
cache afterwards. numba announces a compilation (a ``numba:compile`` event) only when it found
nothing in that cache, so listening for it says exactly when the cache is cold, without
guessing from timers or from numba's cache files.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from typing import Any, TextIO

__all__ = ["SCANNER_KERNEL", "SCANNER_MODULES", "announce_compiling"]

SCANNER_MODULES = ("probes.sources.classad",)
"""Where the compiled functions of the ClassAd readers are defined (with their submodules)."""

SCANNER_KERNEL = "probes.sources.classad.kernel"
"""The one module of the readers that imports numba: the listener is installed as it is imported."""


@contextmanager
def announce_compiling(
    stream: TextIO | None = None, modules: Sequence[str] = SCANNER_MODULES, kernel: str = SCANNER_KERNEL
) -> Iterator[None]:
    """While inside, write one line to ``stream`` (default: stderr) when numba starts compiling
    a function defined in ``modules``; nothing when everything comes from the cache.

    numba is not imported for it: a command that reads no ClassAd never loads numba (0.2-0.3
    CPU-s). When numba is not loaded yet, the listener is installed just before the scanner's
    module (``kernel``) is first imported (it imports numba itself), so no compilation is missed."""
    listener = _Announcer(stream, tuple(modules))
    if "numba" in sys.modules:
        listener.install()
    hook = _BeforeImport(kernel, listener.install)
    sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        sys.meta_path.remove(hook)
        listener.uninstall()


class _BeforeImport(importlib.abc.MetaPathFinder):
    """Calls ``then`` once, just before module ``name`` is first looked for; finds nothing itself."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: object | None = None) -> ModuleSpec | None:
        if fullname == self.name:
            self.then()
        return None


class _Announcer:
    """Speaks once: the scanner's functions compile one after the other, nested, and one line
    is enough. Listens to numba once :meth:`install` ed (which imports numba)."""

    def __init__(self, stream: TextIO | None, modules: tuple[str, ...]) -> None:
        self.stream, self.modules, self.said = stream, modules, False
        self.listener: Any = None  # numba's Listener, once numba is imported

    def install(self) -> None:
        if self.listener is not None:
            return
        from numba.core import event

        announcer = self

        class Listener(event.Listener):  # numba.core.event.register takes only its own Listeners
            def on_start(self, event: event.Event) -> None:
                announcer.started(event.data["dispatcher"])

            def on_end(self, event: event.Event) -> None:
                pass

        self.listener = Listener()
        event.register("numba:compile", self.listener)  # type: ignore[no-untyped-call]  # numba has no type hints

    def uninstall(self) -> None:
        if self.listener is not None:
            from numba.core import event

            event.unregister("numba:compile", self.listener)  # type: ignore[no-untyped-call]  # numba has no type hints
            self.listener = None

    def started(self, dispatcher: Any) -> None:
        """numba starts compiling a function of ``dispatcher``: said once, if it is the scanner's."""
        if self.said:
            return
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
