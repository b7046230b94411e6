"""Reading a configuration file: TOML parsed, values no key may hold refused, the model
validated, and every problem worded with the file, the key's path and what was expected::

    demo.toml: partitions[0].memory: expected a size like "2 GiB", "512 MiB" or "4 GB", got '2 gigs'
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from collector.errors import ConfigError
from probes.config.model import ProbeConfig
from probes.errors import SourceError
from probes.sources.inputs import read_input  # a FIFO or a device is refused before it blocks

__all__ = ["MAX_SECONDS", "load_config", "parse_config"]


_CONFIG_BYTES = 16 << 20  # a configuration of every key documented is some 30 KB


def load_config(
    path: str | os.PathLike[str] | None, beneath: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
) -> ProbeConfig:
    """Read and validate a configuration file; None gives the defaults (relative to the cwd).
    ``beneath``: the file's tables with the keys it does not set filled in (the pool's own
    configuration: :meth:`probes.config.condor.PoolConfiguration.under`)."""
    if path is None:
        if beneath is not None:
            return parse_config(beneath({}), "the pool's configuration").resolved(Path.cwd())
        return ProbeConfig().resolved(Path.cwd())
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such configuration file")
    try:
        text = read_input(path, "a TOML configuration", limit=_CONFIG_BYTES).decode("utf-8")
    except SourceError as exc:
        raise ConfigError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested deeper than can be read") from None
    return parse_config(raw if beneath is None else beneath(raw), str(path)).resolved(path.parent.absolute())


def parse_config(raw: Mapping[str, Any], source: str = "<config>") -> ProbeConfig:
    hostile = list(_hostile_values(raw, ""))
    if hostile:
        raise ConfigError("\n".join(f"{source}: {p}" for p in hostile))
    try:
        return ProbeConfig.model_validate(raw)
    except ValidationError as exc:
        problems = [_describe(err, raw) for err in exc.errors(include_url=False)]
        raise ConfigError("\n".join(f"{source}: {p}" for p in problems)) from None


#: The longest duration a ``*_s`` key may give: about 31 years. A scheduler's timers and
#: ``datetime.timedelta`` overflow long before 1e308, and nothing a probe does waits longer.
MAX_SECONDS = 1e9


def _hostile_values(value: Any, key: str) -> Iterator[str]:
    """What no key may hold, whatever its type, for the commands to refuse as the check does
    (issue 29): a NUL character (no path, name or expression has one, and the OS refuses it at
    run time), a number that is not finite (TOML's ``inf``, ``nan``), an integer beyond 64 bits,
    a duration (``*_s``) beyond :data:`MAX_SECONDS`. Yields one problem per bad value."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _hostile_values(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _hostile_values(v, f"{key}[{i}]")
    elif isinstance(value, str):
        if "\0" in value:
            yield f"{key}: a NUL character cannot be in a value (a path, a name or an expression), got {value!r}"
    elif isinstance(value, bool):
        return
    elif isinstance(value, float) and not math.isfinite(value):
        yield f"{key}: expected a finite number, got {value!r}"
    elif isinstance(value, int) and not -(2**63) <= value < 2**63:
        yield f"{key}: expected an integer within 64 bits, got {value!r}"
    elif isinstance(value, (int, float)) and key.endswith("_s") and abs(value) > MAX_SECONDS:
        yield f"{key}: expected at most {MAX_SECONDS:g} seconds (about 31 years), got {value!r}"


_TYPES = {
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list of tables ([[partitions]])",
    "float_type": "a number",
    "float_parsing": "a number",
    "int_type": "an integer",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "dict_type": "a table",
    "path_type": "a path (a string)",
}


def _describe(err: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    loc = [p for p in err["loc"] if p not in ("function-after", "function-before")]
    key = _key_path(loc)
    kind = err["type"]
    got = err.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        hint = ""
        if parent is not None:
            close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; expected one of {', '.join(parent.model_fields)}"
        return f"{key}: unknown key{hint}"
    if kind == "missing":
        return f"{key}: required key is missing"
    if kind in ("value_error", "assertion_error"):
        message = str(err["ctx"]["error"]) if "ctx" in err else err["msg"]
        return f"{key}: {message}" if key else message
    if kind in _TYPES:
        return f"{key}: expected {_TYPES[kind]}, got {got!r}"
    if kind in ("greater_than", "greater_than_equal"):
        bound = err["ctx"].get("gt", err["ctx"].get("ge"))
        word = "greater than" if kind == "greater_than" else "at least"
        return f"{key}: expected a number {word} {bound:g}, got {got!r}"
    if kind in ("less_than", "less_than_equal"):
        bound = err["ctx"].get("lt", err["ctx"].get("le"))
        word = "less than" if kind == "less_than" else "at most"
        return f"{key}: expected a number {word} {bound:g}, got {got!r}"
    if kind == "literal_error":
        return f"{key}: expected {err['ctx']['expected']}, got {got!r}"
    return f"{key}: {err['msg']}, got {got!r}"


def _key_path(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    """The settings class at a key path, to suggest keys that exist there."""
    model: Any = ProbeConfig
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        annotation = field.annotation
        args = getattr(annotation, "__args__", ())
        candidates = [annotation, *args]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return None
    return model if isinstance(model, type) else None
