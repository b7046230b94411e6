"""``fairacct config check|example``: the configuration as the commands see it, once checked
(with ``--connect``, whether what it names answers: :mod:`probes.connections`); the files the
wheel ships (the example configuration, the systemd units), printed or written."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError
from probes.cli.common import EXIT_FAILED, EXIT_OK, check_config, check_source_files, warn_loose_token
from probes.cli.options import ALL_SOURCES, add_actions, add_options, condor_option

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "configuration"

CONNECT_TIMEOUT_S = 10.0
"""How long each thing ``config check --connect`` tries may take to answer, unless --timeout says."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probes.examples import EXAMPLES

    action = add_actions(parser)
    check = add_options(
        action("check", help="validate the configuration and print the keys it sets (--json: every key, resolved)"),
        *ALL_SOURCES,
    )
    check.add_argument(
        "--connect",
        action="store_true",
        help="also try the pool's collectors (with sources.live), the store and a collector's store: one line "
        "each, exit 1 if any fails",
    )
    condor_option(check)
    check.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help=f"with --connect: seconds each may take to answer (default {CONNECT_TIMEOUT_S:g}; the pool at most "
        "pool.timeout_s)",
    )
    example = add_options(
        action(
            "example",
            help="print the example configuration (every key documented) or a systemd unit, as the wheel ships them",
        )
    )
    example.add_argument(
        "name", nargs="?", choices=EXAMPLES, default=EXAMPLES[0], help="the file (default %(default)s)"
    )
    example.add_argument(
        "--write", metavar="DIR", help="write every one of them into DIR instead (an existing file is kept)"
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    if args.action == "example":
        return _examples(args)
    check_config(config)
    check_source_files(config)
    warn_loose_token(config)
    if args.connect:
        return _connect(args, config)
    if args.timeout is not None:
        raise ConfigError("--timeout is for --connect: without it, config check connects to nothing")
    if args.json:  # every key, resolved, defaults included
        print(json.dumps(config.model_dump(mode="json"), indent=2))
        return EXIT_OK
    # what the file and the options set, one line each: the whole resolved configuration is some
    # 300 lines of defaults, in which a mistyped value is not seen (--json prints it)
    set_keys = _flat(config.model_dump(mode="json", exclude_unset=True))
    said: dict[str, str] = {}
    if args.condor:  # which keys the pool's configuration gave, and from which of its knobs
        from probes.config.condor import pool_configuration

        pool = pool_configuration()
        said = pool.said
        args.config = args.config or pool.config_file
    print(f"configuration ok: {args.config or 'no file (every key at its default)'}")
    for key, value in set_keys:
        given = next((k for k in said if key == k or key.startswith(f"{k}.")), None)
        print(f"  {key} = {json.dumps(value)}" + (f"  (the pool's {said[given]})" if given else ""))
    print(f"every other key at its default ({'--json' if set_keys else 'config check --json'} prints them all)")
    return EXIT_OK


def _flat(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``values`` (nested tables) as ``(dotted.key, value)`` pairs, in the order of the model."""
    out: list[tuple[str, Any]] = []
    for key, value in values.items():
        if isinstance(value, dict) and value:
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _connect(args: argparse.Namespace, config: ProbeConfig) -> int:
    """config check --connect: each thing tried, on a line of its own (``--json``: a list); exit 1
    if any failed."""
    from probes.connections import reach

    timeout_s = CONNECT_TIMEOUT_S if args.timeout is None else args.timeout
    if not timeout_s > 0:
        raise ConfigError(f"--timeout: expected a number of seconds > 0, got {timeout_s:g}")
    tried = reach(config, timeout_s=timeout_s)
    if args.json:
        print(json.dumps({"connect": [{"name": r.name, "ok": r.ok, "said": r.said} for r in tried]}, indent=2))
    else:
        print("\n".join(f"{r.name}: {'ok' if r.ok else 'FAILED'}: {r.said}" for r in tried))
    return EXIT_OK if all(r.ok for r in tried) else EXIT_FAILED


def _examples(args: argparse.Namespace) -> int:
    from probes.examples import EXAMPLES, example_text

    if not args.write:
        print(example_text(args.name), end="")
        return EXIT_OK
    folder = Path(args.write)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in EXAMPLES:
            target = folder / name
            if target.exists():
                print(f"fairacct: {target} exists, kept as it is", file=sys.stderr)
                continue
            target.write_text(example_text(name), encoding="utf-8")
            print(f"wrote {target}")
    except OSError as exc:
        raise ConfigError(f"--write: cannot write into {folder}: {exc.strerror or exc}") from exc
    return EXIT_OK
