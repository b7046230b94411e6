"""The ``fairacct`` command line: :mod:`~probes.cli.registry` lists its commands, one module
each in :mod:`~probes.cli.commands`; :mod:`~probes.cli.parser` reads the line, and :func:`run`
runs the command (the one place errors become exit codes; only this package prints).
:mod:`~probes.cli.options` and :mod:`~probes.cli.common` are what the commands share;
:mod:`~probes.cli.views`, :mod:`~probes.cli.usage_views` and :mod:`~probes.cli.analytics_views`
turn results into tables and JSON; :mod:`~probes.cli.times` reads times."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from collector.errors import ConfigError, FairacctError
from probes.cli import registry, scanner_cache
from probes.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from probes.cli.parser import parse

__all__ = ["main", "run"]


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


def run(args: argparse.Namespace, *, prepared: Callable[[], None] | None = None) -> int:
    """Run the command :func:`probes.cli.parser.parse` read (its module in the registry) with
    the configuration the command line names; its exit code. A configuration error is 2, any
    other :class:`~collector.errors.FairacctError` 1, each said in one line on stderr."""
    from probes.cli.compiling import announce_compiling
    from probes.config import apply_overrides, load_config  # pydantic and pandas: once the line is read
    from probes.sources import sandbox

    try:
        config = apply_overrides(load_config(args.config), vars(args))
        sandbox.configure(config.sources.evaluation_budget_s)
        if prepared is not None:
            prepared()
        with announce_compiling():  # the first run after an install: 20-60 s of numba, said on stderr
            return registry.COMMANDS[args.command].run(args, config)
    except ConfigError as exc:
        print(f"fairacct: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FairacctError as exc:
        print(f"fairacct: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `fairacct jobs | head`
        return EXIT_OK
