"""``python -m mappings``: write the index templates (``mappings/<kind>.json``) and the records'
guide (docs/records.md, in a source tree) from the declarations; ``--check``: say which differ
and exit 1, writing nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from mappings import DIRECTORY
from mappings.kinds import DECLARED
from mappings.tables import guide_text
from mappings.templates import template_text


def _made() -> dict[Path, str]:
    files = {DIRECTORY / f"{kind.name}.json": template_text(kind) for kind in DECLARED.values()}
    docs = DIRECTORY.parent / "docs"
    if docs.is_dir():  # a source tree (an installed wheel has no guides)
        files[docs / "records.md"] = guide_text(DECLARED.values())
    return files


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: python -m mappings [--check]", file=sys.stderr)
        return 2
    stale = [p for p, text in _made().items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    for path in stale:
        if check:
            print(f"{path}: differs from what the declarations make (run `python -m mappings`)", file=sys.stderr)
        else:
            path.write_text(_made()[path], encoding="utf-8")
            print(f"wrote {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
