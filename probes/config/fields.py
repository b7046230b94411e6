"""The configuration's building blocks: the section base and the value types its keys share.

A section forbids unknown keys (a typo is an error that suggests the key meant) and is frozen
and strict (a TOML string is not a number); sizes are read as operators write them ("2 GiB").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import classad2
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Strict

from probes.units import parse_size

__all__ = ["KIB", "MIB", "DiskSize", "Expression", "LaxPath", "MemorySize", "OptionalExpression", "Section"]

MIB = 1024**2
KIB = 1024


def _expression(text: str) -> str:
    """A ClassAd expression, checked by parsing it with classad2."""
    try:
        classad2.ExprTree(text)
    except classad2.ClassAdException as exc:
        raise ValueError(f"expected a ClassAd expression, got {text!r} (classad2 cannot parse it)") from exc
    return text


def _size(unit: int, what: str) -> BeforeValidator:
    def parse(value: Any) -> float | None:
        if value is None:
            return None
        try:
            return parse_size(value, unit)
        except ValueError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(parse)


Expression = Annotated[str, BeforeValidator(lambda v: _expression(v) if isinstance(v, str) else v)]
OptionalExpression = Annotated[
    str, BeforeValidator(lambda v: _expression(v) if isinstance(v, str) and v.strip() else v)
]


#: What a path setting may be on Linux (PATH_MAX, NAME_MAX), and a depth no site needs: deeper,
#: creating the folder (``mkdir -p``, by recursion) fails later than the check that should say so.
PATH_BYTES, NAME_BYTES, PATH_DEPTH = 4095, 255, 256


def _path(path: Path) -> Path:
    """A path no system call will refuse for its length or depth (named in the error)."""
    text = os.fsencode(path)
    longest = max((os.fsencode(p) for p in path.parts), key=len, default=b"")
    if len(text) > PATH_BYTES:
        raise ValueError(f"a path of {len(text)} bytes, more than the {PATH_BYTES} a system call takes")
    if len(longest) > NAME_BYTES:
        raise ValueError(
            f"a path whose part {longest[:40].decode(errors='replace')!r}... is {len(longest)} bytes long, "
            f"more than the {NAME_BYTES} a file name may be"
        )
    if len(path.parts) > PATH_DEPTH:
        raise ValueError(f"a path {len(path.parts)} folders deep, more than {PATH_DEPTH}")
    return path


LaxPath = Annotated[Path, Strict(False), AfterValidator(_path)]  # a TOML string becomes a Path
MemorySize = Annotated[float | None, _size(MIB, "memory")]
DiskSize = Annotated[float | None, _size(KIB, "disk")]


class Section(BaseModel):
    """A section of the file: unknown keys refused, values frozen, types strict."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
