"""Bearer tokens, one per probe: a directory with a file per probe, named after the probe.

``tokens/fairacct@ce01.example.org`` holds that probe's token (surrounding whitespace is
ignored). A request's token is compared with every known one in constant time
(:func:`hmac.compare_digest`, no early exit), so the time of a refusal says nothing about how
close a guess was. The probe a token belongs to is the only name the request may write in.

The directory is looked at again every ``rescan_s`` seconds at most (only when a request
comes), so tokens can be added, changed or revoked without a restart. Tokens never appear in
logs, reprs or error messages; only probe names do.

What is unsafe fails closed (issue 54):

* **A token two files hold** would write in one name or the other as they happen to be read
  (the last one won, silently), so it proves neither: the collector does not start, naming both
  files (:class:`ConfigError`); read again while it runs, both names are refused (one ERROR line
  naming the files) while every other token is read as usual, so that a revocation made in the
  same change is not held back.
* **A directory removed, emptied or unreadable** revokes every token at the next look (one ERROR
  line when it goes); the tokens are read again once it is back. At start, a missing directory
  is a :class:`ConfigError`. A probe refused (401) keeps its records and sends them again.
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from collector.errors import ConfigError, UnauthorizedError

__all__ = ["TokenRing"]

_log = logging.getLogger("fairacct.collector")

_Signature = tuple[tuple[str, int, int], ...]
"""The directory's token files as last seen: name, mtime (ns) and size of each."""

_SHARED = "hold the same token, so it cannot say which probe sends"
_MEND = "give each probe a token of its own (openssl rand -hex 32)"


def _files(directory: Path, names: tuple[str, ...]) -> str:
    """The paths of ``names`` in ``directory``, as a message lists them ("a, b and c")."""
    paths = [str(directory / name) for name in names]
    return ", ".join(paths[:-1]) + " and " + paths[-1]


class TokenRing:
    """The probes' tokens, from ``directory`` (see the module docstring)."""

    def __init__(
        self, directory: str | os.PathLike[str], *, rescan_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.directory = Path(directory)
        self._rescan_s = rescan_s
        self._clock = clock
        self._signature: _Signature | None = None  # None: the directory could not be read
        self._tokens: tuple[tuple[str, bytes], ...] = ()
        self._scanned_at = clock()
        signature = self._scan_signature()
        shared = self._load(signature)
        if shared:  # at start: refuse to run, rather than refuse probes that were never told
            raise ConfigError(f"collector token_dir: {_files(self.directory, shared[0])} {_SHARED}: {_MEND}")

    def __repr__(self) -> str:
        return f"TokenRing({str(self.directory)!r}, {len(self._tokens)} probe(s))"

    @property
    def probes(self) -> tuple[str, ...]:
        """The names of the probes that have a token."""
        return tuple(name for name, _ in self._tokens)

    def probe_for(self, authorization: str | None) -> str:
        """The probe whose token an ``Authorization: Bearer <token>`` header carries.

        Raises :class:`UnauthorizedError` without a bearer token or with an unknown one.
        """
        self._maybe_rescan()
        scheme, _, given = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise UnauthorizedError("no bearer token: send 'Authorization: Bearer <token>' with your probe's token")
        presented = given.strip().encode("utf-8", "surrogateescape")
        found: str | None = None
        for name, token in self._tokens:  # every token is compared: no early exit
            if hmac.compare_digest(presented, token):
                found = name
        if found is None:
            raise UnauthorizedError("the bearer token is not one this collector knows")
        return found

    # -- reading the directory ---------------------------------------------------------------

    def _maybe_rescan(self) -> None:
        now = self._clock()
        if now - self._scanned_at < self._rescan_s:
            return
        self._scanned_at = now
        try:
            signature = self._scan_signature()
        except ConfigError as exc:  # removed or unreadable: what it held is revoked (fail closed)
            if self._signature is not None:  # said once, when it goes
                _log.error("%s; every token is refused (%d revoked) until it is back", exc, len(self._tokens))
            self._signature, self._tokens = None, ()
            return
        if signature != self._signature:
            for names in self._load(signature):
                every = "both are" if len(names) == 2 else "all are"
                _log.error("token files %s %s: %s refused until each probe has a token of its own",
                           _files(self.directory, names), _SHARED, every)  # fmt: skip
            if not self._tokens:
                _log.warning("tokens re-read from %s: no token, every probe is refused", self.directory)
            else:
                _log.info("tokens re-read from %s: %d probe(s)", self.directory, len(self._tokens))

    def _scan_signature(self) -> _Signature:
        try:
            entries = sorted(os.scandir(self.directory), key=lambda e: e.name)
        except FileNotFoundError:
            raise ConfigError(f"collector token_dir: {self.directory}: no such directory") from None
        except NotADirectoryError:
            raise ConfigError(
                f"collector token_dir: {self.directory}: expected a directory of token files, got a file"
            ) from None
        except OSError as exc:
            raise ConfigError(f"collector token_dir: {self.directory}: cannot be read ({exc.strerror})") from None
        out = []
        for entry in entries:
            try:
                if entry.name.startswith(".") or not entry.is_file():
                    continue
                info = entry.stat()
            except OSError:  # removed since the listing (or unreadable): not a token
                continue
            out.append((entry.name, info.st_mtime_ns, info.st_size))
        return tuple(out)

    def _load(self, signature: _Signature) -> list[tuple[str, ...]]:
        """Read the tokens of ``signature``'s files; the names of the files that share a token,
        one tuple per token, which none of them gets (see the module docstring)."""
        tokens = []
        for name, _, _ in signature:
            path = self.directory / name
            try:
                token = path.read_bytes().strip()
                mode = path.stat().st_mode
            except OSError as exc:
                _log.error("token file %s cannot be read (%s); probe %r is refused", path, exc.strerror, name)
                continue
            if not token:
                _log.error("token file %s is empty; probe %r is refused", path, name)
                continue
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                _log.warning("token file %s can be read by others than its owner; chmod 600 it", path)
            tokens.append((name, token))
        holders: dict[bytes, list[str]] = {}  # at load only: a request compares in constant time
        for name, token in tokens:
            holders.setdefault(token, []).append(name)
        shared = [tuple(names) for names in holders.values() if len(names) > 1]
        refused = {name for names in shared for name in names}
        self._signature = signature
        self._tokens = tuple((name, token) for name, token in tokens if name not in refused)
        return shared
