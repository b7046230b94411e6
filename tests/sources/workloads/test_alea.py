"""Alea machines files, and which unit of RAM they were read in."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.errors import SourceError
from probes.sources.workloads.alea import read_alea_machines


def test_wagap_2013_gives_ram_in_kb(metacentrum: Path) -> None:
    machines, reading = read_alea_machines(metacentrum / "wagap-2013.machines")
    assert (reading.ram_unit, reading.assumed) == ("KB", True)
    assert "RAM per node read as KB" in reading.note and "--ram-unit overrides" in reading.note
    # zewura 20 x 80 CPUs, 529426432 KB = 517018 MiB (505 GiB); zegox 48 x 12, 94035968 KB = 91832 MiB
    assert machines[["name", "count", "cpus", "memory", "gpus", "speed"]].values.tolist() == [
        ["zewura", 20, 80.0, 517018.0, 0.0, 1.0],
        ["zegox", 48, 12.0, 91832.0, 0.0, 1.0],
    ]
    assert machines["node_cost"].tolist() == [1.0, 1.0]


def test_ngi_cz_gives_ram_in_gb_and_gpus_in_column_8(metacentrum: Path) -> None:
    machines, reading = read_alea_machines(metacentrum / "NGI_CZ.machines")
    assert (reading.ram_unit, reading.assumed) == ("GB", True)
    # 47 clusters, 799 nodes, 34,556 cores, 290 GPUs (fixtures README)
    assert len(machines) == 47
    assert machines["count"].sum() == 799
    assert (machines["count"] * machines["cpus"]).sum() == 34_556
    assert (machines["count"] * machines["gpus"]).sum() == 290
    adan = machines.set_index("name").loc["adan"]
    # 15 adan 61 32 1 192 5.9 2: 192 GB = 196608 MiB, 2 GPUs, column 7 kept as it is
    assert (adan["count"], adan["cpus"], adan["memory"], adan["gpus"], adan["column7"]) == (
        61,
        32.0,
        196608.0,
        2.0,
        5.9,
    )


def test_an_explicit_unit_overrides_the_guess(metacentrum: Path) -> None:
    machines, reading = read_alea_machines(metacentrum / "NGI_CZ.machines", ram_unit="MB")
    assert (reading.ram_unit, reading.assumed) == ("MB", False)
    assert machines.set_index("name").loc["adan", "memory"] == 192.0
    assert "(as told)" in reading.note


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pool.machines"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0\tzewura\t20\t80\t1\n", ("pool.machines line 1: expected 6 to 8 tab-separated columns (id, name, nodes, "
         "CPUs per node, speed, RAM per node, then optionally column 7 and GPUs per node), got 5")),
        ("0\tzewura\ttwenty\t80\t1\t512\n", "pool.machines line 1: column 3 (nodes): expected a number, got 'twenty'"),
        ("0\tzewura\t20\t0\t1\t512\n",
         "pool.machines line 1: column 4 (CPUs per node): expected a number greater than 0, got '0'"),
        ("0\tzewura\t2.5\t8\t1\t512\n",
         "pool.machines line 1: column 3 (nodes): expected a whole number of nodes, got '2.5'"),
        ("0\ta\t1\t8\t1\t64\n1\ta\t1\t8\t1\t64\n",
         "pool.machines line 2: column 2 (name): cluster 'a' is listed twice"),
        # 0.5 / 8 = 0.0625 per core: 64 bytes, 64 KiB or 64 MiB, none a plausible RAM per core
        ("0\ttiny\t1\t8\t1\t0.5\n", ("pool.machines: cannot tell the unit of column 6 (RAM per node): "
                                     "the median node has 0.0625 per core, which is 64 bytes as KB, 64 KiB as MB "
                                     "and 64 MiB as GB; give the unit (--ram-unit KB|MB|GB)")),
        ("# only a comment\n", "pool.machines: no machines, only comments; expected an Alea machines file"),
    ],
)  # fmt: skip
def test_errors_name_the_file_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SourceError) as info:
        read_alea_machines(write(tmp_path, text))
    assert str(info.value) == f"{tmp_path}/{message}"


def test_a_bad_unit(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"RAM unit must be auto, KB, MB or GB, got 'TB'"):
        read_alea_machines(write(tmp_path, "0\ta\t1\t8\t1\t64\n"), ram_unit="TB")
