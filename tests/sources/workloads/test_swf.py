"""SWF workload logs (the Parallel Workloads Archive's and MetaCentrum's variant)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from probes.errors import SourceError
from probes.sources.history import JOB_COLUMNS
from probes.sources.workloads.swf import NodePart, parse_node_spec, read_swf

# Two jobs of a plain SWF log, times relative to UnixStartTime:
#   1: submitted at 10, waited 5, ran 100 s on 4 of 4 requested processors, 2048 KB each,
#      40 s of CPU per processor, completed; user 3, group 1, queue 2, partition 1
#   2: requested processors unknown (-1): 2 allocated; memory unknown; cancelled
PLAIN = """\
; Version: 2.2
; UnixStartTime: 1000000000
; MaxProcs: 64
1 10 5 100 4 40 -1 4 600 2048 1 3 1 -1 2 1 -1 -1
2 20 -1 0 2 -1 -1 -1 600 -1 5 4 1 -1 2 1 -1 -1
"""


def write(tmp_path: Path, text: str, name: str = "log.swf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_plain_swf_log(tmp_path: Path) -> None:
    workload, report = read_swf(write(tmp_path, PLAIN))
    assert workload.variant == "swf" and report.ads == 2
    jobs = workload.jobs
    assert list(jobs.columns[: len(JOB_COLUMNS)]) == list(JOB_COLUMNS)
    first = jobs.iloc[0]
    assert (first["job_id"], first["user"], first["group"], first["queue"], first["partition"]) == (
        "1",
        "3",
        "1",
        "2",
        "1",
    )
    # submit 1000000000 + 10, start + 5, end + 100
    assert (first["qdate"], first["start"], first["end"]) == (1_000_000_010, 1_000_000_015, 1_000_000_115)
    assert (first["walltime_s"], first["cpu_time_s"]) == (100.0, 160.0)  # 40 s x 4 processors
    assert (first["status"], first["exit_code"], first["swf_status"]) == (4, 0, 1)
    # each processor is a request of 1 core and 2048 KB = 2 MiB
    requests = workload.requests
    assert requests[["job", "count", "cpus", "memory"]].values.tolist() == [[0, 4.0, 1.0, 2.0], [1, 2.0, 1.0, 0.0]]
    assert (first["cpus"], first["memory"], first["n_hosts"]) == (1.0, 2.0, 4)
    second = jobs.iloc[1]
    assert second["status"] == 3 and np.isnan(second["start"])  # cancelled, wait unknown
    assert report.rejects == {"field 10 (requested memory) unknown (-1): priced by cores only": 1}


def test_the_metacentrum_variant(tmp_path: Path) -> None:
    log = (
        "7 100 1 50 16 1 1024 16 3600 1073741824 1 62 1 1 -1 1 1 1 {12,12} q_1d 2:ppn=8:cl_zegox#excl\n"
        "8 100 1 50 5 1 1024 5 3600 419430400 1 62 1 1 -1 1 1 1 {1} q_2h 1:ppn=1+2:ppn=2:mem=3gb\n"
    )
    workload, _ = read_swf(write(tmp_path, log))
    assert workload.variant == "metacentrum"
    assert workload.jobs["queue"].tolist() == ["q_1d", "q_2h"]
    r = workload.requests
    # field 10 is bytes per node: 1073741824 B = 1024 MiB, 419430400 B = 400 MiB; mem=3gb wins
    assert r[["job", "count", "cpus", "memory", "exclusive"]].values.tolist() == [
        [0, 2.0, 8.0, 1024.0, True],
        [1, 1.0, 1.0, 400.0, False],
        [1, 2.0, 2.0, 3072.0, False],
    ]
    assert r["properties"].tolist() == [("cluster=zegox",), (), ()]
    assert workload.jobs["n_hosts"].tolist() == [2, 3]


@pytest.mark.parametrize(
    ("spec", "parts"),
    [
        ("1:ppn=64:x86_64:cl_zewura#excl", [NodePart(1, 64, None, True, ("x86_64", "cluster=zewura"))]),
        ("8:ppn=8:x86_64:cl_zegox", [NodePart(8, 8, None, False, ("x86_64", "cluster=zegox"))]),
        ("1", [NodePart(1, 1, None, False, ())]),
        ("2:infiniband", [NodePart(2, 1, None, False, ("infiniband",))]),
        ("1:ppn=12:^zewura12.cerit-sc.cz", [NodePart(1, 12, None, False, ("^host=zewura12.cerit-sc.cz",))]),
        ("zewura19.cerit-sc.cz:ppn=12:brno", [NodePart(1, 12, None, False, ("host=zewura19.cerit-sc.cz", "brno"))]),
        ("1:ppn=5:host=zewura10", [NodePart(1, 5, None, False, ("host=zewura10",))]),
        ("1:ppn=1:^cl_zewura", [NodePart(1, 1, None, False, ("^cluster=zewura",))]),
        ("1:ppn=16:nodecpus80", [NodePart(1, 16, None, False, ("cpus=80",))]),
        ("1:ppn=14:mem=2gb", [NodePart(1, 14, 2048.0, False, ())]),
        ("1:ppn=1+3:ppn=2", [NodePart(1, 1, None, False, ()), NodePart(3, 2, None, False, ())]),
        ("-1", []),
    ],
)
def test_node_specifications(spec: str, parts: list[NodePart]) -> None:
    assert parse_node_spec(spec) == parts


def test_a_fractional_ppn_is_read_as_torque_does() -> None:
    notes: list[str] = []
    assert parse_node_spec("1:ppn=1.5:brno", notes) == [NodePart(1, 1, None, False, ("brno",))]
    assert notes == ["field 21: ppn=1.5 is not a whole number: read as 1, as TORQUE does"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 2 3\n", "log.swf line 1: expected 18 fields (SWF) or 21 (MetaCentrum's SWF), got 3"),
        (PLAIN + "3 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n", "log.swf line 6: expected 18 fields (swf format), got 17"),
        (PLAIN.replace("1 10 5 100", "1 10 5 ten"), "log.swf line 4: field 4 (run time): expected a number, got 'ten'"),
        (PLAIN.replace("1 10 5 100", "-1 10 5 100"),
         "log.swf line 4: field 1 (job number): expected a job number >= 0, got '-1'"),
        ("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 {} q 1:ppn=x\n",
         "log.swf line 1: field 21 (node specification): ppn='x' in '1:ppn=x', expected a whole number of processors"),
        ("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 {} q 1:mem=3gigs\n",
         "log.swf line 1: field 21 (node specification): mem='3gigs' in '1:mem=3gigs', "
         "expected a size like 3gb, 500mb or 1024kb"),
        # issue 29: values no job can have were tracebacks
        (PLAIN.replace("1 10 5 100", "1.5 10 5 100"),
         "log.swf line 4: field 1 (job number): expected a whole number, got '1.5'"),
        (PLAIN.replace("1 10 5 100", "1 1e308 5 100"),
         "log.swf line 4: field 2 (submit time): expected a number below 2^53, got '1e308'"),
        (PLAIN.replace("1 10 5 100", "1 9999999999999 5 100"),
         "log.swf line 4: field 2 (submit time): expected submit, wait and run times that end before year 10000, "
         "got '9999999999999'"),
        ("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 {} q 99999999999:ppn=1\n",
         "log.swf line 1: field 21 (node specification): node count 99999999999 in '99999999999:ppn=1', "
         "expected fewer than 2^31 nodes"),
        ("; only a header\n", "log.swf: no jobs, only comments; expected an SWF workload log"),
        ("", "log.swf: the file is empty, expected an SWF workload log"),
    ],
)  # fmt: skip
def test_errors_name_the_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SourceError) as info:
        read_swf(path)
    assert str(info.value) == f"{tmp_path}/{message}"


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"nope\.swf: no such file$"):
        read_swf(tmp_path / "nope.swf")


def test_the_wagap_2013_workload(metacentrum: Path) -> None:
    workload, report = read_swf(metacentrum / "wagap-2013.swf")
    jobs, requests = workload.jobs, workload.requests
    assert workload.variant == "metacentrum"
    # 17,900 jobs of 75 users (fixtures README), every one read
    assert len(jobs) == 17_900 and jobs["user"].nunique() == 75
    assert jobs["job_id"].tolist() == [str(i) for i in range(17_900)]
    # 9 jobs of "1:ppn=1+2:ppn=2" and 3 of "1:ppn=1+3:ppn=2" have two parts each
    assert len(requests) == 17_900 + 12
    # the first job: 1:ppn=64:x86_64:cl_zewura#excl, 68719476736 B = 65536 MiB per node
    first = requests.iloc[0]
    assert (first["cpus"], first["memory"], first["exclusive"]) == (64.0, 65536.0, True)
    assert first["properties"] == ("x86_64", "cluster=zewura")
    assert int(requests["exclusive"].sum()) == 231  # "...:cl_zewura#excl"
    # the 20 "ppn=1.5" jobs are read as TORQUE read them (field 8 says 1)
    assert report.rejects == {"field 21: ppn=1.5 is not a whole number: read as 1, as TORQUE does": 20}
    # node specs agree with field 8 on every job: each job's cores are its requests' cores
    cores = np.bincount(requests["job"], weights=requests["count"] * requests["cpus"])
    assert (
        cores
        == np.array([float(line.split()[7]) for line in (metacentrum / "wagap-2013.swf").read_text().splitlines()])
    ).all()
    # 2012-12-31 .. 2013-03-30 (submit times)
    assert jobs["qdate"].min() == 1356996147 and jobs["qdate"].max() < 1364688000
