"""The ``fairacct`` command line: :mod:`~probes.cli.registry` lists its commands,
:mod:`~probes.cli.parser` reads it, :mod:`~probes.cli.commands` runs the command (the one place
errors become exit codes; only this package prints); :mod:`~probes.cli.views` and
:mod:`~probes.cli.usage_views` turn results into tables and JSON; :mod:`~probes.cli.times`
reads times."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from probes.cli import scanner_cache
from probes.cli.parser import parse

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, *, prepared: Callable[[], None] | None = None) -> int:
    """Run ``fairacct`` with ``argv`` (default: the process's arguments); the exit code.

    The command line is read before the commands' modules are imported (pandas, numba, the
    readers and the stores take a second to import): ``--version``, ``--help`` and a mistyped
    option answer at once. ``prepared`` is called once they are imported, before the command
    runs (the process's entry point freezes the heap they built: ``probes/__main__.py``)."""
    words = sys.argv[1:] if argv is None else list(argv)
    # before numba is imported: a read-only install run without a writable home must still cache the scanner
    if not {"-h", "--help", "--version"} & set(words):
        scanner_cache.choose(scanner_cache.config_file(words), next((w for w in words if not w.startswith("-")), None))
    args = parse(words)
    from probes.cli.commands import run

    if prepared is not None:
        prepared()
    return run(args)
