"""``fairacct slot-weight`` on real histories: the wagap workload (two machine classes) and the
bills of a real HTCondor 25 pool's snapshot, their expressions evaluated by classad2."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import classad2
import pytest

from probes.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_wagap_penalty_weight_and_its_error(metacentrum: Path) -> None:
    swf, machines = metacentrum / "wagap-2013.swf", metacentrum / "wagap-2013.machines"
    code, out, err = run("slot-weight", "--swf", str(swf), "--machines", str(machines), "--json")
    assert code == 0, err
    doc = json.loads(out)
    # zewura (80 cores, 504905 MiB) prices a MiB at 80 / 504905 = 1.584e-4 cores, zegox (12 cores,
    # 91832 MiB) at 1.307e-4; the fit lands between, nearer zewura, whose nodes run most of the usage
    assert doc["classes"] == ["zewura", "zegox"]
    assert doc["slot_weight"] == "max({Cpus * 1, Memory * 0.0001547334909})"
    assert doc["coefficients"] == {"cpus": 1.0, "memory": 0.0001547334909, "disk": 0.0}
    e = doc["error"]
    assert e["jobs"] == 17_900
    # 92.7 % of the node requests are priced by their cores (exact); the rest by memory, on either class
    assert e["mean_abs_rel_error"] == pytest.approx(0.0083467, abs=1e-6)
    assert e["within_5pct"] == pytest.approx(0.9541899, abs=1e-6)
    assert e["usage_error"] == pytest.approx(0.0225851, abs=1e-6)  # zewura's own weight: 0.0298
    assert e["total_error"] == pytest.approx(-0.0096862, abs=1e-6)
    worst = doc["users"][0]
    assert (worst["user"], worst["jobs"]) == ("1262", 85) and worst["error_pct"] == pytest.approx(18.41, abs=0.01)
    assert len(doc["users"]) == 75
    # what the negotiator computes from the printed text is what the error was measured with
    ad = classad2.ClassAd({"Cpus": 1, "Memory": 87040, "Disk": 0})  # job 1's request
    assert classad2.ExprTree(doc["slot_weight"]).eval(ad) == pytest.approx(87040 * 0.0001547334909)


def test_billed_weight_on_a_real_snapshot(condor25: Path) -> None:
    code, out, err = run("slot-weight", "--metric", "billed", "--status-file", str(condor25 / "status.ads"))
    assert code == 0, err
    # six allocations billed max(billed cores / 16, billed MiB / 32768) x 16 cores: 4, 5.818, 12.8,
    # 5.818, 2.909 and 12 (1 core, 24 GiB); 12 / 24576 sets the memory term, 12.8 / 12 the cores'
    assert out.startswith("== slot-weight (billed)\nSLOT_WEIGHT = max({Cpus * 1.066666667, Memory * 0.00048828125})\n")
    # weights 4.267, 4.267, 12.8, 4.267, 2.133, 12: |error| 6.7 %, 26.7 % x 3, 0, 0 -> mean 14.44 %
    assert ("error on the 6 billed allocations of the snapshots: mean |weight - metric| / metric 14.44 %, "
            "33.3 % of them within 5 %; usage charged to the wrong jobs 9.56 %, "
            "total usage -8.33 %") in out  # fmt: skip


def test_billed_weight_on_two_instants_of_a_real_pool(condor25: Path, tmp_path: Path) -> None:
    # the same pool dumped again 300 s later: each slot's name is in both files (this raised
    # pandas' InvalidIndexError); twice the bills give the one instant's weight and error
    status = (condor25 / "status.ads").read_text()
    later = tmp_path / "later.ads"
    later.write_text(re.sub(r"(?m)^MyCurrentTime = (\d+)$", lambda m: f"MyCurrentTime = {int(m[1]) + 300}", status))
    assert later.read_text() != status
    code, out, err = run(
        "slot-weight", "--metric", "billed", "--status-file", str(condor25 / "status.ads"), "--status-file", str(later)
    )
    assert code == 0, err
    assert out.startswith("== slot-weight (billed)\nSLOT_WEIGHT = max({Cpus * 1.066666667, Memory * 0.00048828125})\n")
    assert ("error on the 12 billed allocations of the snapshots: mean |weight - metric| / metric 14.44 %, "
            "33.3 % of them within 5 %; usage charged to the wrong jobs 9.56 %, "
            "total usage -8.33 %") in out  # fmt: skip
    assert "12 billed allocations of 2 nodes at 2 instants, each weighted by the time its snapshot stands for" in out


def test_bad_metric_and_inputs_are_refused(condor25: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["slot-weight", "--metric", "cpu"])
    assert "invalid choice: 'cpu'" in capsys.readouterr().err
    code, _, err = run("slot-weight", "--metric", "billed", "--swf", "x.swf")
    assert code == 2 and "--metric billed fits the bills of slot snapshots: give --status-file" in err
    code, _, err = run("slot-weight", "--history", str(condor25 / "history.ads"))
    assert code == 2 and "no machines: give --machines" in err
