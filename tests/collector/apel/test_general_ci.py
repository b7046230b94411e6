"""fairacct's equal names are APEL's server's: ``general_ci_key`` against MariaDB's own
``utf8mb4_general_ci`` (the server of ../shared/apel; skipped, with the reason, without it)."""

from __future__ import annotations

import subprocess
import sys
import unicodedata

from collector.apel.keys import general_ci_key
from tests.collector.apel.conftest import ApelServer

from ...conftest import ROOT

# (a, b, equal under utf8mb4_general_ci): the issue's cases, checked against the server below
CASES = [
    ("Jürgen Groß", "Jürgen Gros", True),  # ß weighs S
    ("𠮷田 太郎", "𩸽田 太郎", True),  # every character outside the BMP weighs U+FFFD
    ("T2_US_Nebraska", "T2_US_NEBRASKA ", True),  # case, and the pad space
    ("Élodie", "elodie", True),
    ("Weiß", "Weiss", False),  # one character against two: Python's casefold would merge them
    ("ﬀ", "FF", False),
    ("i̇", "I", False),
    (unicodedata.normalize("NFD", "José"), "José", False),  # a decomposed accent is a character of its own
    ("a\t", "a", False),  # only the space pads
    ("ǅ", "Ǆ", True),
]


def test_the_issue_cases_without_a_server() -> None:
    for a, b, equal in CASES:
        assert (general_ci_key(a) == general_ci_key(b)) is equal, (a, b)


def _server_equal(server: ApelServer, pairs: list[tuple[str, str]]) -> list[bool]:
    import pymysql

    conn = pymysql.connect(unix_socket=server.socket_path, user="root", database="apelserver", charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TEMPORARY TABLE pairs (n INT PRIMARY KEY, a VARCHAR(16), b VARCHAR(16)) "
                "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
            )
            cur.executemany("INSERT INTO pairs VALUES (%s, %s, %s)", [(n, a, b) for n, (a, b) in enumerate(pairs)])
            cur.execute("SELECT a = b FROM pairs ORDER BY n")
            return [bool(r[0]) for r in cur.fetchall()]
    finally:
        conn.close()


def test_the_weights_module_is_what_the_server_says(apel_server: ApelServer) -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/make_general_ci.py"), "--socket", apel_server.socket_path, "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_bmp_character_and_its_case_variants_compare_as_on_the_server(apel_server: ApelServer) -> None:
    pairs = [(a, b) for a, b, _ in CASES]
    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        c = chr(code)
        variants = {c.upper(), c.lower(), c.casefold(), unicodedata.normalize("NFKD", c)[:1], "s", "A"} - {c, ""}
        pairs += [(c, v) for v in sorted(variants) if len(v) <= 3]
    pairs += [(chr(0x10000 + n * 977), chr(0x1F600)) for n in range(60)]  # supplementary planes
    server = _server_equal(apel_server, pairs)
    ours = [general_ci_key(a) == general_ci_key(b) for a, b in pairs]
    differ = [(a, b, s) for (a, b), s, o in zip(pairs, server, ours, strict=True) if s != o]
    assert not differ, differ[:20]
    assert sum(server) > 1000  # the sweep did meet equal pairs
