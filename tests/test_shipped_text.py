"""What the wheel ships says nothing a wheel user cannot follow (issue 38).

The README is the wheel's long description and ``probes``, ``collector`` and ``mappings`` (with
their package data) are the wheel: none of them cites the shared tree beside the project
(``../shared``) or a path of the source tree the wheel does not hold (``benchmarks/``, ``tests/``,
``config/``, ``scripts/``). The guides in ``docs/`` are the source tree's: their links must
resolve, and only ``docs/development.md`` speaks of the shared tree.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))

SHARED = re.compile(r"\.\./shared")
SOURCE_PATH = re.compile(r"(?<![\w./-])(?:benchmarks|tests|config|scripts)/(?=[A-Za-z_])")

# The few references that are right where they are: (file, text of the line holding it).
ALLOWED = {
    # how the examples get into the wheel: links to config/ of the source tree
    ("probes/examples/__init__.py", "The files are links to ``config/`` of the source tree"),
}


def _shipped() -> list[Path]:
    """The README, every module of the packages and their package data (links followed)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    files = [ROOT / "README.md"]
    for top in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        files += sorted((ROOT / top.rstrip("*")).rglob("*.py"))
    for package, patterns in project["tool"]["setuptools"]["package-data"].items():
        folder = ROOT.joinpath(*package.split("."))
        for pattern in patterns:
            files += sorted(folder.glob(pattern))
    assert len(files) > 100 and any(p.suffix == ".toml" for p in files)  # the globs found the tree
    return files


def _citations(path: Path, pattern: re.Pattern[str]) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if pattern.search(line) and not any(rel == f and text in line for f, text in ALLOWED):
            found.append(f"{rel}:{number}: {line.strip()}")
    return found


@pytest.mark.parametrize("pattern", [SHARED, SOURCE_PATH], ids=["../shared", "source-tree path"])
def test_nothing_shipped_cites_what_a_wheel_user_does_not_have(pattern: re.Pattern[str]) -> None:
    found = [c for path in _shipped() for c in _citations(path, pattern)]
    assert not found, "\n".join(found)


def test_the_allowed_references_are_still_there() -> None:
    """An allowed line that changed is taken off the list, not left to allow something else."""
    for rel, text in ALLOWED:
        assert text in (ROOT / rel).read_text(encoding="utf-8"), rel


def test_the_readme_starts_with_the_two_commands() -> None:
    """A rule of the project: after its title, the README starts with `make demo` and `make test`."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# fairacct"
    body = [line for line in lines[1:] if line.strip()]
    assert body[0] == "```sh"
    commands = [line.split("#")[0].strip() for line in body[1 : body.index("```", 1)] if not line.startswith(" ")]
    assert commands == ["make demo", "make test"]


def test_the_readme_says_what_fairacct_is_first_and_stays_short() -> None:
    """Issue 52: the README had grown back to 396 lines, its first paragraph CI timings. What
    fairacct is comes right after the two commands; the rest lives in docs/ (at most 150 lines)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text.split("```", 2)[2].lstrip()
    assert after.startswith("fairacct is an accounting probe for HTCondor and glideinWMS pools")
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\d tests|\d min \d+ s", after.split("\n\n", 2)[1])  # the suite's: docs/development.md


def test_only_the_development_guide_speaks_of_the_shared_tree() -> None:
    found = [c for path in DOCS if path.name != "development.md" for c in _citations(path, SHARED)]
    assert not found, "\n".join(found)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for _, line in _prose(path) if re.match(r"#{1,6} ", line)}


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_the_links_of_the_readme_and_the_guides_resolve(path: Path) -> None:
    broken = []
    for number, line in _prose(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists() and not file.startswith("../../shared/"):
                broken.append(f"{path.name}:{number}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and linked.exists() and anchor not in _anchors(linked):
                broken.append(f"{path.name}:{number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_the_prose_is_reflowed(path: Path) -> None:
    """No line of prose over 120 characters; tables, code blocks and long URLs aside."""
    long = [
        f"{path.name}:{number}: {len(line)} characters"
        for number, line in _prose(path)
        if len(line) > 120 and not line.lstrip().startswith("|") and "://" not in line
    ]
    assert not long, "\n".join(long)
