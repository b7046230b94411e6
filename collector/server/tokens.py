"""Bearer tokens, one per probe: a directory with a file per probe, named after the probe.

``tokens/fairacct@ce01.example.org`` holds that probe's token (surrounding whitespace is
ignored). A request's token is compared with every known one in constant time
(:func:`hmac.compare_digest`, no early exit), so the time of a refusal says nothing about how
close a guess was. The probe a token belongs to is the only name the request may write in.

The directory is looked at again every ``rescan_s`` seconds at most (only when a request
comes), so tokens can be added, changed or revoked without a restart. Tokens never appear in
logs, reprs or error messages; only probe names do.
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


class TokenRing:
    """The probes' tokens, from ``directory`` (see the module docstring)."""

    def __init__(
        self, directory: str | os.PathLike[str], *, rescan_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.directory = Path(directory)
        self._rescan_s = rescan_s
        self._clock = clock
        self._signature: tuple[tuple[str, int, int], ...] = ()
        self._tokens: tuple[tuple[str, bytes], ...] = ()
        self._scanned_at = clock()
        self._load(self._scan_signature())

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
        except ConfigError as exc:  # the directory went away: keep the tokens we have
            _log.error("%s; keeping the %d token(s) read before", exc, len(self._tokens))
            return
        if signature != self._signature:
            self._load(signature)
            _log.info("tokens re-read from %s: %d probe(s)", self.directory, len(self._tokens))

    def _scan_signature(self) -> tuple[tuple[str, int, int], ...]:
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
            if entry.name.startswith(".") or not entry.is_file():
                continue
            info = entry.stat()
            out.append((entry.name, info.st_mtime_ns, info.st_size))
        return tuple(out)

    def _load(self, signature: tuple[tuple[str, int, int], ...]) -> None:
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
        self._signature = signature
        self._tokens = tuple(tokens)
