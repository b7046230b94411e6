"""The PASS/FAIL lines every benchmark ends with, and its exit code."""

from __future__ import annotations

from collections.abc import Sequence

EXIT_FAIL = 1


def verdict(checks: Sequence[tuple[bool, str]]) -> int:
    """Print one PASS or FAIL line per target; 0 when all are met, EXIT_FAIL otherwise."""
    print()
    for ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    return 0 if all(ok for ok, _ in checks) else EXIT_FAIL
