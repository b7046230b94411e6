"""The process's entry point (``python -m probes`` and the ``fairacct`` script): the one place
the process exits.

A command's work done, the interpreter's own teardown is skipped: it would free every module
and run full garbage collections over the heap pandas, numba and the stores built at import
(5-13 % of a short command's CPU, measured with py-spy). The output is flushed and the exit
handlers run first (``atexit``: logging's, multiprocessing's, ``weakref.finalize``'s, such as
the bindings' workers being killed), so nothing written or owed is lost. The heap the imports
built is frozen out of the collector before the command runs (``gc.freeze``): it lives until the
end, and a full collection during the command would walk it for nothing.
"""

import atexit
import contextlib
import gc
import os
import signal
import sys
from typing import NoReturn

EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by SIGINT (Ctrl-C): 128 + 2, as a shell reports it."""


def run() -> NoReturn:
    """Run ``fairacct`` with the process's arguments and exit with its code.

    Ctrl-C (SIGINT) at any moment, the imports included, is one line and exit code 130, never a
    traceback. What the command committed stays (the outbox and the stores commit in SQLite
    transactions, which an interrupted write leaves as they were), and the next run redoes the
    rest. Once the command is done, a SIGINT during the last flush of its output is kept for the
    exit code rather than raised in the middle of the exit handlers. The services (``probe run``,
    ``collector serve``) handle SIGINT themselves, as SIGTERM: a clean stop."""
    try:
        from probes.cli import main

        code = main(prepared=gc.freeze)
    except KeyboardInterrupt:
        code = _interrupted()
    late: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: late.append(signum))
    with contextlib.suppress(BrokenPipeError):  # `fairacct jobs | head`: what it did not take is not owed
        sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    if late and code != EXIT_INTERRUPTED:
        code = _interrupted()
    os._exit(code)


def _interrupted() -> int:
    with contextlib.suppress(OSError):
        sys.stderr.write("fairacct: interrupted (SIGINT); what was committed is kept, the next run does the rest\n")
        sys.stderr.flush()
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    run()
