"""Running the command the command line names, with its configuration: the one place errors
become exit codes (:mod:`probes.cli.common` lists them), called by :func:`probes.cli.main`.

The command is looked up in the registry by name, and run; nothing else looks at its name.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from collector.errors import ConfigError, DiskFullError, FairacctError
from probes.cli import registry
from probes.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["DISK_FULL_HINT", "run"]

DISK_FULL_HINT = (
    "free space on that file system and run again (what was committed before is kept, and nothing of this run "
    "was half-written)"
)


def run(args: argparse.Namespace, *, prepared: Callable[[], None] | None = None) -> int:
    """Run the command :func:`probes.cli.parser.parse` read (its module in the registry) with
    the configuration the command line names; its exit code. A configuration error is 2, any
    other :class:`~collector.errors.FairacctError` 1, each said in one line on stderr (a full
    file system with what to do: :data:`DISK_FULL_HINT`)."""
    from probes.cli.compiling import announce_compiling
    from probes.config import apply_overrides  # pydantic and pandas: once the line is read
    from probes.sources import sandbox

    try:
        config = apply_overrides(_configuration(args), vars(args))
        sandbox.configure(config.sources.evaluation_budget_s)
        if prepared is not None:
            prepared()
        with announce_compiling():  # the first run after an install: 20-60 s of numba, said on stderr
            return registry.COMMANDS[args.command].run(args, config)
    except ConfigError as exc:
        print(f"fairacct: configuration error: {exc}", file=sys.stderr)
        _said_in_the_daemons_log(args, f"configuration error: {exc}")
        return EXIT_USAGE
    except DiskFullError as exc:  # what to do is not in the message, which names only what failed
        print(f"fairacct: {exc}; {DISK_FULL_HINT}", file=sys.stderr)
        return EXIT_FAILED
    except FairacctError as exc:
        print(f"fairacct: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `fairacct jobs | head`
        return EXIT_OK


def _configuration(args: argparse.Namespace) -> ProbeConfig:
    """The configuration the command line names; with ``--condor``, beneath the pool's own
    (:mod:`probes.config.condor`): what the pool's configuration says, and fairacct's file from
    ``FAIRACCT_CONFIG`` when no ``--config`` is given."""
    from probes.config import load_config

    if not getattr(args, "condor", False):
        return load_config(args.config)
    from probes.config.condor import pool_configuration

    pool = pool_configuration()
    args.daemon_log = pool.keys["log"]["file"]  # where a configuration error is said, under condor_master
    return load_config(args.config or pool.config_file, beneath=pool.under)


def _said_in_the_daemons_log(args: argparse.Namespace, line: str) -> None:
    """Under condor_master (``--condor``) stderr goes nowhere: the error is appended to the log
    the service would have written (the master starts it again and again, and each try says why)."""
    import time

    path = getattr(args, "daemon_log", None)
    if not path:
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{stamp} fairacct ERROR {' '.join(line.split())}\n")
    except OSError:  # the log's directory itself is wrong: stderr said it
        pass
