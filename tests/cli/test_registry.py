"""The command registry is the one list of commands: ``fairacct --help`` lists exactly it,
every command it declares reads its options and answers ``--help``, and ``run`` reaches each
command through it (issue 28, item 3)."""

from __future__ import annotations

import argparse
import importlib
import inspect
from typing import Any

import pytest

from probes.cli import commands, main
from probes.cli.parser import build
from probes.cli.registry import COMMANDS, Command
from probes.config import ProbeConfig


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
    assert _listed(out) == {c.name: c.help for c in COMMANDS.values()}
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
    module, _, function = COMMANDS[name].run.partition(":")
    target = importlib.import_module(f"probes.cli.{module}")
    assert list(inspect.signature(getattr(target, function)).parameters) == ["args", "config"]
    calls: list[tuple[argparse.Namespace, Any]] = []

    def ran(args: argparse.Namespace, config: ProbeConfig) -> int:
        calls.append((args, config))
        return 42

    monkeypatch.setattr(target, function, ran)
    args = argparse.Namespace(command=name, config=None)
    assert commands.run(args) == 42
    assert len(calls) == 1 and calls[0][0] is args and isinstance(calls[0][1], ProbeConfig)


def test_a_command_is_declared_by_name_and_two_functions() -> None:
    for name, command in COMMANDS.items():
        assert isinstance(command, Command) and command.name == name and command.help
        for reference in (command.arguments, command.run):
            module, _, function = reference.partition(":")
            assert callable(getattr(importlib.import_module(f"probes.cli.{module}"), function)), reference
