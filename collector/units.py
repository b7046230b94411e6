"""Sizes with units, as operators write them ("2 GiB", "64 MiB"), in a unit of a given size.

A bare number is taken to be in that unit already (HTCondor counts memory in MiB and disk in
KiB; the collector's body limits are bytes). Units follow HTCondor's submit language, where
``request_memory = 2GB`` is 2048 MiB: K, M, G and T (with or without a trailing B, and the
explicit KiB, MiB, GiB, TiB) are powers of 1024, so that a canonical unit written "2 GB" means
what the same words mean in a job. The probes' configuration and the collector's read sizes
here (:mod:`probes.units` names it for the probes).
"""

from __future__ import annotations

import re

__all__ = ["MAX_SIZE", "parse_size"]

_FACTORS = {
    "": None,  # the resource's own unit
    "b": 1,
    "k": 1024, "kb": 1024, "kib": 1024,
    "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1024**3, "gib": 1024**3,
    "t": 1024**4, "tb": 1024**4, "tib": 1024**4,
}  # fmt: skip
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*")


def parse_size(value: int | float | str, unit_bytes: int) -> float:
    """Return ``value`` in units of ``unit_bytes`` (1024**2 for MiB, 1024 for KiB).

    Raises ValueError with a message that says what was expected.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):  # a list, table, date from TOML
        raise ValueError(f'expected a size like "2 GiB" or a number, got {value!r}')
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"expected a size of zero or more, got {value!r}")
        return _checked(float(value), unit_bytes, value)
    m = _SIZE.fullmatch(value)
    if m is None or m.group(2).lower() not in _FACTORS:
        raise ValueError(f'expected a size like "2 GiB", "512 MiB" or "4 GB", got {value!r}')
    number, unit = float(m.group(1)), m.group(2).lower()
    factor = _FACTORS[unit]
    return _checked(number if factor is None else number * factor / unit_bytes, unit_bytes, value)


#: The largest size, in the resource's unit: exact in a float64 (8 PiB of bytes, far more in MiB).
MAX_SIZE = 2.0**53


def _checked(size: float, unit_bytes: int, given: object) -> float:
    """``size`` (in units of ``unit_bytes``), refused when it cannot be a size: not finite,
    beyond :data:`MAX_SIZE`, or more than nothing but less than one byte (``1e-320``)."""
    if not size <= MAX_SIZE:  # inf and nan too
        raise ValueError(f"expected a size below {MAX_SIZE:.17g} of this unit, got {given!r}")
    if 0 < size * unit_bytes < 1:
        raise ValueError(f"expected a size of 0 or at least one byte, got {given!r}")
    return size
