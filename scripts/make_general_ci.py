#!/usr/bin/env python3
"""Write ``collector/apel/general_ci_weights.py``: the weight MariaDB's ``utf8mb4_general_ci``
gives each character of the Basic Multilingual Plane that is not its own code point.

APEL's server compares every name (site, DN, VO, group, role, submit host, job id) under that
collation, so what fairacct takes for one key must be what the server takes for one key. The
weights are not guessed from Unicode's case tables: they are asked of a running MariaDB, one
``WEIGHT_STRING`` per code point (the surrogates, which are no characters, aside), and a test
(``tests/collector/apel/test_general_ci.py``) asks again and checks the module against it.

Usage: ``python scripts/make_general_ci.py --socket PATH [--check]`` (a MariaDB's Unix socket,
user root, as ``../shared/apel/start-apel-server.sh`` starts it); ``--check``: exit 1 when the
module differs from what the server says, writing nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

MODULE = Path(__file__).resolve().parents[1] / "collector" / "apel" / "general_ci_weights.py"

QUERY = (
    "SELECT seq, HEX(WEIGHT_STRING(CONVERT(CONVERT(UNHEX(LPAD(HEX(seq), 4, '0')) USING ucs2) USING utf8mb4) "
    "COLLATE utf8mb4_general_ci)) FROM seq_0_to_65535 WHERE seq NOT BETWEEN 55296 AND 57343"
)
"""Each BMP code point's weight under ``utf8mb4_general_ci`` (MariaDB's sequence engine)."""

HEADER = '''"""The weights of MariaDB's ``utf8mb4_general_ci`` that differ from the code point, one
``CODE:WEIGHT`` pair (hexadecimal) per BMP character, as the server (``SERVER``) gave them.

Written by the project's ``make_general_ci`` script from a running server; do not edit (a test asks the
server again). Every other BMP character weighs its own code point; every character outside
the BMP weighs U+FFFD's.
"""

__all__ = ["SERVER", "WEIGHTS"]

SERVER = "{version}"
"""The MariaDB the weights were read from."""

WEIGHTS = (
'''


def server_weights(socket: str) -> tuple[str, dict[int, int]]:
    """The server's version and the weights differing from the code point, by code point."""

    def ask(sql: str) -> str:
        r = subprocess.run(
            ["mariadb", "-S", socket, "-uroot", "-D", "mysql", "--default-character-set=utf8mb4", "-NB", "-e", sql],
            capture_output=True,
            text=True,
            check=True,
        )
        return r.stdout

    version = ask("SELECT @@version").strip()
    weights = {}
    for line in ask(QUERY).splitlines():
        code, weight = line.split("\t")
        if len(weight) != 4:  # one weight of two bytes per character: anything else is not this collation
            raise SystemExit(f"U+{int(code):04X}: unexpected weight {weight!r}")
        if int(weight, 16) != int(code):
            weights[int(code)] = int(weight, 16)
    return version, weights


def module_text(version: str, weights: dict[int, int]) -> str:
    pairs = [f"{c:04X}:{w:04X}" for c, w in sorted(weights.items())]
    lines = [" ".join(pairs[i : i + 10]) for i in range(0, len(pairs), 10)]
    body = "".join(f'    "{line} "\n' for line in lines)
    return HEADER.format(version=version) + body + ")\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="the MariaDB's Unix socket (user root)")
    parser.add_argument("--check", action="store_true", help="compare with the module, write nothing")
    args = parser.parse_args()
    version, weights = server_weights(args.socket)
    if args.check:
        from importlib.util import module_from_spec, spec_from_file_location

        spec = spec_from_file_location("general_ci_weights", MODULE)
        assert spec and spec.loader
        mod = module_from_spec(spec)
        spec.loader.exec_module(mod)
        held = {int(c, 16): int(w, 16) for c, _, w in (p.partition(":") for p in mod.WEIGHTS.split())}
        if held != weights:
            differ = sorted(set(held.items()) ^ set(weights.items()))[:10]
            print(f"{MODULE} differs from MariaDB {version}: {differ}", file=sys.stderr)
            return 1
        print(f"{MODULE}: {len(weights)} weights, as MariaDB {version} says")
        return 0
    MODULE.write_text(module_text(version, weights))
    print(f"{MODULE}: {len(weights)} weights from MariaDB {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
