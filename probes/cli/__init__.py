"""The ``fairacct`` command line: :mod:`~probes.cli.registry` lists its commands, one module
each in :mod:`~probes.cli.commands`; :mod:`~probes.cli.parser` reads the line and :func:`main`
runs the command through :func:`probes.cli.running.run`, the one place errors become exit codes
(only this package prints). :mod:`~probes.cli.options` and :mod:`~probes.cli.common` are what
the commands share; :mod:`~probes.cli.views`, :mod:`~probes.cli.usage_views` and
:mod:`~probes.cli.analytics_views` turn results into tables and JSON; :mod:`~probes.cli.times`
reads times."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from probes.cli import scanner_cache
from probes.cli.parser import parse
from probes.cli.running import run

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, *, prepared: Callable[[], None] | None = None) -> int:
    """Run ``fairacct`` with ``argv`` (default: the process's arguments); the exit code.

    The command line is read before anything heavy is imported (pandas, numba, the readers and
    the stores take a second to import): ``--version``, ``--help`` and a mistyped option answer
    at once. ``prepared`` is called once the configuration is loaded (pydantic, pandas and the
    settings' modules imported), before the command runs (the process's entry point freezes
    the heap they built: ``probes/__main__.py``)."""
    words = sys.argv[1:] if argv is None else list(argv)
    # before numba is imported: a read-only install run without a writable home must still cache the scanner
    if not {"-h", "--help", "--version"} & set(words):
        scanner_cache.choose(scanner_cache.config_file(words), next((w for w in words if not w.startswith("-")), None))
    return run(parse(words), prepared=prepared)
