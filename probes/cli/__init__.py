"""The ``fairacct`` command line: :mod:`~probes.cli.commands` parses and runs the commands
(only it prints and exits); :mod:`~probes.cli.views` and :mod:`~probes.cli.usage_views` turn
results into tables and JSON; :mod:`~probes.cli.times` reads times."""

from __future__ import annotations

from probes.cli.commands import main

__all__ = ["main"]
