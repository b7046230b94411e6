"""The layout's invariants: the import graph has one arrow between the packages and no circle,
and the pure core imports nothing but the math.

The graph is read from the source (every ``import`` and ``from ... import``, inside functions
too, so a lazy import cannot hide a circle); an edge goes to the most specific module that
exists (``from collector.sinks import open_sink`` is an edge to ``collector.sinks``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for top in ("probes", "collector") for p in (ROOT / top).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base]) if base else ".".join(anchor)
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
                    break
        graph[name] = edges
    return graph


GRAPH = _graph()


def test_collector_never_imports_probes() -> None:
    wrong = sorted(
        (m, t) for m, ts in GRAPH.items() for t in ts if m.startswith("collector") and t.startswith("probes")
    )
    assert not wrong


def test_no_import_circle() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                pytest.fail("import circle: " + " -> ".join([*stack[stack.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)


def test_the_accounting_imports_only_the_math() -> None:
    for module, targets in GRAPH.items():
        if module.startswith("probes.accounting"):
            assert all(t.startswith("probes.accounting") for t in targets), (module, targets)


def test_import_probes_accounting_stays_light() -> None:
    code = (
        "import sys, probes.accounting; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'numba', 'classad2', 'htcondor2', 'collector', 'apscheduler', 'elasticsearch') "
        "or m.startswith(('probes.sources', 'probes.config', 'probes.pipeline')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == []


def test_readers_take_their_few_settings_not_the_configuration() -> None:
    for module in (
        "probes.sources.status",
        "probes.sources.history",
        "probes.sources.queue",
        "probes.sources.classad.long",
    ):
        assert "probes.config" not in GRAPH[module], module


def _sources() -> dict[str, ast.Module]:
    return {
        _module_name(p): ast.parse(p.read_text(encoding="utf-8"))
        for top in ("probes", "collector")
        for p in (ROOT / top).rglob("*.py")
    }


def test_every_record_kind_is_built_in_one_module() -> None:
    """The schema's builder (collector.records.table_docs) is called by the probe in one place."""
    callers = {
        name
        for name, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "table_docs"
    }
    assert callers == {"probes.pipeline.records"}


def test_every_checkpoint_is_named_in_one_module() -> None:
    """Checkpoint names ('history:...', 'snapshot:...', 'fairshare:...', 'fairness:...') are spelled in one module."""
    spelled = {
        name
        for name, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(("history:", "snapshot:", "fairshare:", "fairness:"))
    }
    assert spelled == {"probes.sources.checkpoints"}


def test_only_the_command_line_prints_and_only_main_exits() -> None:
    """Library code returns or raises (issue 28, item 6): print() is called in probes.cli only,
    and the process exits in probes/__main__.py only (argparse aside)."""
    printing, exiting = set(), set()
    for name, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called = getattr(node.func, "id", getattr(node.func, "attr", None))
                if called == "print":
                    printing.add(name)
                elif called in ("exit", "_exit", "quit") or (called == "abort" and _os_abort(node.func)):
                    exiting.add(name)
    assert {m for m in printing if not m.startswith("probes.cli.")} == set()
    assert exiting == {"probes.__main__"}


def _os_abort(func: ast.expr) -> bool:
    """``abort()`` or ``os.abort()``, not another object's ``abort`` (an asyncio transport's)."""
    return isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "os")


_HEAVY = ("pandas", "numpy", "numba", "pydantic", "elasticsearch")
_START = f"""
import contextlib, io, json, sys
def heavy():
    return sorted(m for m in sys.modules if m.split('.')[0] in {_HEAVY!r})
import probes.cli
seen = {{"import": heavy()}}
for argv in (["--version"], ["--help"]):
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
        probes.cli.main(argv)
    seen[argv[0]] = heavy()
    seen[argv[0] + " says"] = out.getvalue()[:40]
print(json.dumps(seen))
"""


def test_the_command_line_starts_without_pandas_or_numba() -> None:
    """Issue 12, item 12: `import probes.cli` imported pandas, numba and the stores, so that
    `fairacct --version` cost 1.1 CPU-s. The command line is read first, and a command imports
    what it needs."""
    out = subprocess.run([sys.executable, "-c", _START], capture_output=True, text=True, check=True, cwd=ROOT)
    seen = json.loads(out.stdout)
    assert seen["import"] == seen["--version"] == seen["--help"] == []
    assert seen["--version says"].startswith("fairacct 0") and seen["--help says"].startswith("usage: fairacct [-h]")
