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
import sys
from typing import NoReturn

from probes.cli import main


def run() -> NoReturn:
    """Run ``fairacct`` with the process's arguments and exit with its code."""
    code = main(prepared=gc.freeze)
    with contextlib.suppress(BrokenPipeError):  # `fairacct jobs | head`: what it did not take is not owed
        sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    run()
