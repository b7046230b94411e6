"""Where numba keeps the compiled ClassAd scanner, when it cannot keep it where it would.

numba caches a compiled function beside its module (``__pycache__``) or under the user's
``~/.cache/numba``; when neither is writable (a venv owned by root run by a system account
without a home: ``runuser``, cron, a container) it refuses to define the function at all
(``cannot cache function '_lowest_lane': no locator available``), so every command that imports
the readers failed, ``config check`` included. Before that import, :func:`choose` gives numba a
directory it can write (``NUMBA_CACHE_DIR``), in this order:

1. ``numba-cache/`` in the state directory the configuration names (``probe.state_dir``, and
   ``collector.state_dir`` for the collector), when that directory exists: the service account
   writes there anyway, and the compilation (20-60 s) is kept across runs;
2. ``fairacct-numba-<uid>/`` in the temporary directory (``TMPDIR``), created mode 0700;
3. a fresh private temporary directory, deleted at exit (the scanner is compiled on every run).

A directory is used only if it belongs to the process's user and no one else can write it:
numba's cache holds pickles it loads, so a directory another user can write into would run
their code. ``NUMBA_CACHE_DIR`` set by the operator is always kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import tomllib
from collections.abc import MutableMapping, Sequence
from pathlib import Path

__all__ = ["ENV", "choose", "config_file"]

ENV = "NUMBA_CACHE_DIR"
_SCANNER = Path(__file__).resolve().parent.parent / "sources" / "classad" / "kernel.py"


def choose(
    config: str | None, command: str | None = None, environ: MutableMapping[str, str] = os.environ
) -> Path | None:
    """Set ``NUMBA_CACHE_DIR`` in ``environ`` when numba has nowhere to cache the scanner; the
    directory chosen, None when numba's own places serve (or the operator set one)."""
    if environ.get(ENV) or _numba_places_writable():
        return None
    for candidate in [*_state_dirs(config, command), Path(tempfile.gettempdir()) / f"fairacct-numba-{os.getuid()}"]:
        if _private(candidate):
            return _use(candidate, environ)
    private = Path(tempfile.mkdtemp(prefix="fairacct-numba-"))
    import atexit  # only on this last resort

    atexit.register(shutil.rmtree, private, ignore_errors=True)
    return _use(private, environ)


def config_file(argv: Sequence[str]) -> str | None:
    """The ``--config FILE`` (or ``--config=FILE``) of a command line, before it is parsed."""
    for i, word in enumerate(argv):
        if word == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--config="):
            return word.partition("=")[2]
    return None


def _use(directory: Path, environ: MutableMapping[str, str]) -> Path:
    environ[ENV] = str(directory)
    import sys

    if "numba" in sys.modules:  # numba reads its environment when imported: read it again
        from numba.core import config as numba_config

        numba_config.reload_config()  # type: ignore[no-untyped-call]  # numba has no type hints
    return directory


def _numba_places_writable() -> bool:
    """Whether numba's own locators (beside the module, then the user-wide cache) can cache the
    scanner: asked of numba itself, which creates the directory as it would anyway (a
    writable ``__pycache__`` answers without importing numba, 0.2-0.3 CPU-s that a command
    reading no ClassAd would pay for nothing)."""
    pycache = _SCANNER.parent / "__pycache__"
    with contextlib.suppress(OSError):  # numba's in-tree locator creates it too: no Python has yet when
        pycache.mkdir(exist_ok=True)  # bytecode is not written (PYTHONDONTWRITEBYTECODE)
    if pycache.is_dir() and os.access(pycache, os.W_OK | os.X_OK):
        return True
    from numba.core.caching import InTreeCacheLocator, UserWideCacheLocator

    def probe() -> None:  # a function to locate: numba's locators want one (its line number)
        pass

    locators = (InTreeCacheLocator, UserWideCacheLocator)
    # numba has no type hints
    return any(cls.from_function(probe, str(_SCANNER)) is not None for cls in locators)  # type: ignore[no-untyped-call]


def _state_dirs(config: str | None, command: str | None) -> list[Path]:
    """The existing state directories the configuration file names, the collector's first for
    ``collector``; none when there is no file or it does not read (its load says why, later)."""
    if not config:
        return []
    path = Path(config)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    sections = ["collector", "probe"] if command == "collector" else ["probe", "collector"]
    found = []
    for section in sections:
        value = raw.get(section, {}).get("state_dir") if isinstance(raw.get(section), dict) else None
        if isinstance(value, str) and value:
            directory = value if os.path.isabs(value) else path.parent.absolute() / value
            if Path(directory).is_dir():
                found.append(Path(directory) / "numba-cache")
    return found


def _private(directory: Path) -> bool:
    """Whether ``directory`` is (made) ours, writable by us and by no one else."""
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        info = directory.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            return False
        tempfile.TemporaryFile(dir=directory).close()
    except OSError:
        return False
    return True
