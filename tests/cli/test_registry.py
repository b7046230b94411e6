"""The command registry is the one list of commands: ``fairacct --help`` lists exactly it,
every command it declares reads its options and answers ``--help``, and ``run`` reaches each
command through it (issue 28, item 3). A command is one module and one line of the registry,
and nothing else looks at a command's name (issue 38, part 3)."""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from probes.cli import commands, common, main, registry, running
from probes.cli.parser import build
from probes.cli.registry import COMMANDS
from probes.config import ProbeConfig

CLI = Path(common.__file__).parent


def _listed(help_text: str) -> dict[str, str]:
    """The commands ``fairacct --help`` lists, each with its help (its wrapped lines joined)."""
    lines = help_text.split("positional arguments:\n  COMMAND\n", 1)[1].split("\n\n", 1)[0].splitlines()
    listed: dict[str, str] = {}
    for line in lines:
        if not line.startswith("     "):  # a command's first line, its help beside it or below
            name, _, text = line.strip().partition(" ")
            listed[name] = text
        else:
            listed[name] += " " + line
    return {name: " ".join(text.split()) for name, text in listed.items()}


def test_the_help_lists_exactly_the_registry(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # no help wrapped at a hyphen
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0, out
    assert _listed(out) == {name: c.HELP for name, c in COMMANDS.items()}
    assert list(_listed(out)) == list(COMMANDS)


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name (a command's actions, the top level's commands)."""
    return next((dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_reads_its_options_and_answers_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    command = _actions(build(name))[name]
    for argv in ([name], *([name, action] for action in _actions(command))):
        with pytest.raises(SystemExit) as info:
            main([*argv, "--help"])
        out = capsys.readouterr().out
        assert info.value.code == 0 and out.startswith(f"usage: fairacct {' '.join(argv)} "), out
        # the options every command has are on the command, or on each of its actions
        assert ("--config FILE" in out) != (len(argv) == 1 and bool(_actions(command))), out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_run_reaches_every_command_through_the_registry(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[argparse.Namespace, Any]] = []

    def ran(args: argparse.Namespace, config: ProbeConfig) -> int:
        calls.append((args, config))
        return 42

    monkeypatch.setattr(COMMANDS[name], "run", ran)
    args = argparse.Namespace(command=name, config=None)
    assert running.run(args) == 42
    assert len(calls) == 1 and calls[0][0] is args and isinstance(calls[0][1], ProbeConfig)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_is_a_module_of_the_commands_with_its_help_options_and_run(name: str) -> None:
    module = COMMANDS[name]
    assert isinstance(module, ModuleType) and module.__name__.rpartition(".")[0] == commands.__name__
    assert module.__name__.rpartition(".")[2] == name.replace("-", "_")  # the module is named after it
    assert isinstance(module.HELP, str) and module.HELP
    assert list(inspect.signature(module.add_arguments).parameters) == ["parser"]
    assert list(inspect.signature(module.run).parameters) == ["args", "config"]
    assert {"HELP", "add_arguments", "run"} <= set(module.__all__)


def test_every_module_of_the_commands_is_in_the_registry() -> None:
    modules = {p.stem for p in (CLI / "commands").glob("*.py") if p.stem != "__init__"}
    assert modules == {m.__name__.rpartition(".")[2] for m in COMMANDS.values()}


def _sources() -> Iterator[tuple[Path, str]]:
    for path in sorted(CLI.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


def test_no_code_dispatches_on_the_command_name() -> None:
    """The registry runs a command's module; no second dispatch on ``args.command`` (a command's
    own actions, ``args.action``, are the command's), and no function named by a string."""
    dispatch = re.compile(r"\bargs\.command\s*(==|!=|\bin\b|\bnot\s+in\b)|\bgetattr\(\s*args\s*,\s*['\"]command")
    found = [
        f"{path.relative_to(CLI)}:{n}: {line.strip()}"
        for path, text in _sources()
        for n, line in enumerate(text.splitlines(), 1)
        if dispatch.search(line) or "import_module" in line
    ]
    assert not found, "\n".join(found)
    uses = {path.relative_to(CLI).as_posix() for path, text in _sources() if "args.command" in text}
    assert uses == {"running.py"}  # registry.COMMANDS[args.command]: the one lookup


# -- a new command: one module and one line of the registry ---------------------------------------

_HELLO = '''
"""fairacct hello: a command of the test's own."""

from __future__ import annotations

import argparse

from probes.cli.common import print_text
from probes.cli.options import add_options

HELP = "say hello to a name"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser)
    parser.add_argument("name", help="who to greet")
    parser.add_argument("--times", type=int, default=1, help="how many times")


def run(args: argparse.Namespace, config: object) -> int:
    print_text(args, {"hello": [args.name] * args.times}, " ".join(["hello", args.name] * args.times))
    return 7
'''


@pytest.fixture
def hello(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A module defining a command, and its line in the registry."""
    (tmp_path / "fairacct_hello.py").write_text(_HELLO, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fairacct_hello

    monkeypatch.setattr(registry, "COMMANDS", {**COMMANDS, "hello": fairacct_hello})
    yield fairacct_hello
    sys.modules.pop("fairacct_hello", None)


def test_a_new_command_is_one_module_and_one_line_of_the_registry(
    hello: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0 and _listed(capsys.readouterr().out)["hello"] == "say hello to a name"
    with pytest.raises(SystemExit) as info:
        main(["hello", "--help"])
    out = capsys.readouterr().out
    assert (
        info.value.code == 0 and "usage: fairacct hello [-h] [--config FILE] [--json]" in out and "--strict" not in out
    ), out
    assert "--times TIMES" in out and "who to greet" in out
    assert main(["hello", "world", "--times", "2"]) == 7
    assert capsys.readouterr().out == "hello world hello world\n"
    assert main(["hello", "world", "--json"]) == 7
    assert capsys.readouterr().out == '{\n "hello": [\n  "world"\n ]\n}\n'
    with pytest.raises(SystemExit) as info:  # its options are its own: argparse refuses another command's
        main(["hello", "world", "--status-file", "x"])
    assert info.value.code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["outbox"],
        ["records", "job"],
        ["export", "--from", "2026-11-01", "--to", "2026-11-02", "--out", "x.csv"],
        ["collector", "serve"],
        ["probe", "checkpoints"],
        ["mappings", "install"],
    ],
)
def test_strict_is_offered_only_where_ads_are_read(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39, point 7: `--strict` ("stop at the first malformed ad") was offered, and ignored,
    by commands that read no ads; now argparse refuses it there, as any option a command lacks.
    In a temporary directory: on code that took it, `collector serve` would start there."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*argv, "--strict"])
    assert info.value.code == 2 and "unrecognized arguments: --strict" in capsys.readouterr().err
