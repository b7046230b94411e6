"""One path for each thing (issue 38): every command that reads a pool's inputs reads them the
same way, and ``probe once`` and the service run one cycle and one delivery.

The reading case is the one the issue measured: histories without ``ProjectName`` and a
user-vo-map sending every user to one VO; before, ``probe once`` stored the VO while
``fairshare``, ``penalty``, ``jobs`` and ``idle`` named no project at all.
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from probes.cli import main

from ..conftest import DEMO, ROOT

IDENTITY = ("submitter", "user", "group", "project")
USERS = ("alice", "bob", "carol", "dave")  # the demo pool's


@pytest.fixture(scope="module")
def unprojected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo pool's dumps without any ``ProjectName``, a user-vo-map of its users to one
    VO, and a configuration of both (its state beside them)."""
    folder = tmp_path_factory.mktemp("unprojected")
    for name in ("status.ads", "queue.ads", "history.ads"):
        text = (DEMO / name).read_text()
        stripped = re.sub(r"^ProjectName = .*\n", "", text, flags=re.M)
        assert stripped != text or name == "queue.ads", f"{name} has no ProjectName to take out"
        (folder / name).write_text(stripped)
    (folder / "user-vo-map").write_text("#voi vo_a\n#VOc VO_A\n" + "".join(f"{u} vo_a\n" for u in USERS))
    for name, classes in (("fairacct.toml", ""), ("classes.toml", 'class_attributes = ["GLIDEIN_Site"]')):
        (folder / name).write_text(
            f"""
[pool]
name = "demo"
interval_s = 300
[sources]
status_files = ["{folder / "status.ads"}"]
idle_files = ["{folder / "queue.ads"}"]
history = ["{folder / "history.ads"}"]
[credentials]
user_vo_map = "{folder / "user-vo-map"}"
[machines]
speed_attribute = "HEPSPEC"
{classes}
[summaries]
recent_days = 0
nightly_days = 0
[probe]
state_dir = "{folder / "state"}"
"""
        )
    return folder / "fairacct.toml"


def command(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """One command's JSON document, run in process as the ``fairacct`` script runs it."""
    capsys.readouterr()
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    doc: dict[str, Any] = json.loads(out)
    return doc


def names(rows: list[dict[str, Any]], key: str = "job_id", identity: tuple[str, ...] = IDENTITY) -> dict[str, Any]:
    return {row[key]: tuple(row[k] for k in identity) for row in rows}


def test_every_command_names_the_same_identities_on_one_configuration(
    unprojected: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(unprojected)
    jobs = command(capsys, "jobs", "--config", config)["jobs"]
    slots = command(capsys, "slots", "--config", config)["allocations"]
    idle = command(capsys, "idle", "--config", config)["idle"]
    penalty = command(capsys, "penalty", "--config", config)["jobs"]
    fairshare = command(capsys, "fairshare", "--config", config)["credentials"]
    bill = command(capsys, "bill", "--config", config)["allocations"]
    assert main(["probe", "once", "--config", config]) == 0
    with sqlite3.connect(unprojected.parent / "state" / "fairacct.sqlite") as db:
        stored = {k: [json.loads(d) for (d,) in db.execute(f"SELECT doc FROM {k}")] for k in ("job", "allocation")}

    assert len(jobs) == 60 and len(slots) == 72 and len(idle) == 6
    # the user-vo-map's VO for every job, bill and idle autocluster, whichever command read them
    for rows in (jobs, slots, idle, penalty, stored["job"], stored["allocation"]):
        assert {row["project"] for row in rows} == {"VO_A"}
    assert {c["name"] for c in fairshare if c["type"] == "account"} == {"VO_A"}
    # and the same four names, row by row
    assert names(jobs) == names(stored["job"])
    assert names(jobs, identity=IDENTITY[1:]) == names(penalty, identity=IDENTITY[1:])  # it shows no submitter
    assert names(slots, "name") == names(stored["allocation"], "name")
    assert {(b["user"], b["group"]) for b in bill} == {(s["user"], s["group"]) for s in slots}


def test_probe_once_reads_the_machine_class_attributes_as_penalty_does(unprojected: Path) -> None:
    """``machines.class_attributes`` split the machine classes the jobs are priced against:
    the status files are read with them for the probe too (before, only ``penalty`` and a
    live pool read them, and ``probe once`` of files failed on a missing column)."""
    from probes.config import load_config
    from probes.pipeline.reading import read_sources
    from probes.pipeline.usage import read_usage_inputs

    config = load_config(unprojected.parent / "classes.toml")
    snapshot = read_sources(config, only=("status_files",)).snapshot
    machines = read_usage_inputs(config).machines
    assert snapshot is not None and machines is not None
    assert "GLIDEIN_Site" in snapshot.slots.columns
    sites = {p for properties in machines["properties"] for p in properties}
    assert sites == {f"GLIDEIN_Site={s}" for s in snapshot.slots["GLIDEIN_Site"]} >= {"GLIDEIN_Site=Purdue"}


def _calls(path: Path, name: str, receiver: str | None = None) -> list[str]:
    """The functions of a module that call ``name`` (a function, or a method of an object
    named ``receiver`` when given)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            if isinstance(func, ast.Attribute):
                called, on = func.attr, getattr(func.value, "id", None)
            else:
                called, on = getattr(func, "id", None), None
            if called == name and (receiver is None or on == receiver):
                found.append(f"{path.relative_to(ROOT)}:{node.name}")
    return found


def test_one_delivery_and_one_cycle() -> None:
    """The outbox is committed to and flushed to a store by one object, the record lane, and the
    cycle's steps are run by one class, whose ``once`` only the ``probe once`` command calls and
    whose jobs the service schedules (issue 52, point 3: before, ``fairness --store-records``
    delivered without the templates' check and the ``[upstream]`` lane, and ``priority`` and
    ``probe checkpoints --reset`` committed without the commit's lock and fault points)."""
    modules = sorted((ROOT / "probes").rglob("*.py"))

    def calls(name: str, receiver: str | None = None) -> list[str]:
        return [c for m in modules for c in _calls(m, name, receiver)]

    # twice there: the [upstream] lane, then the store
    assert calls("flush", "outbox") == ["probes/pipeline/lane.py:_deliver"] * 2
    assert calls("_deliver") == ["probes/pipeline/lane.py:deliver"]
    # every commit of the probe: under the lane's lock, between its fault points
    assert calls("commit", "outbox") == ["probes/pipeline/lane.py:_commit"]
    assert calls("_commit") == ["probes/pipeline/lane.py:commit"]
    # the templates' check: the gate the collector's flusher passes too (collector/sinks/gate.py)
    assert calls("ensure", "gate") == ["probes/pipeline/lane.py:deliver"] and calls("ensure_templates") == []
    assert calls("snapshot_step") == ["probes/pipeline/cycle.py:snapshot"]
    assert calls("history_step") == ["probes/pipeline/cycle.py:history"]
    assert calls("fairshare_step") == ["probes/pipeline/cycle.py:fairshare"]
    assert calls("summarize") == ["probes/cli/commands/summarize.py:run", "probes/pipeline/jobs.py:summaries"]
    assert calls("sync", "priority") == ["probes/cli/commands/priority.py:run"]
    once = calls("once")
    assert len(once) == 1 and once[0].startswith("probes/cli/"), once
    # the service schedules the cycle's jobs and opens neither an outbox nor a store of its own
    service = (ROOT / "probes/service/scheduler.py").read_text()
    assert "self.jobs[name].run(" in service and "self.cycle.jobs" in service
    for opener in ("Outbox(", "open_store(", "Bindings(", "summarize("):
        assert opener not in service, opener
