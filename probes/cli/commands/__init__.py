"""The ``fairacct`` commands, one module each (see :mod:`probes.cli.registry`): its ``HELP``,
``add_arguments(parser)`` and ``run(args, config) -> exit code``, its output with it."""
