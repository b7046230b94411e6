"""Sizes with units, as operators write them ("2 GiB"), turned into HTCondor's units.

HTCondor counts memory in MiB and disk in KiB; a bare number is taken to be in that unit
already. The parser is :mod:`collector.units`' (the collector's settings read sizes too, and
the collector never imports the probes); it is named here for the probes.
"""

from __future__ import annotations

from collector.units import MAX_SIZE, parse_size

__all__ = ["MAX_SIZE", "parse_size"]
