"""Seeds 001 and 002 on the readers' tables: demand from autoclusters, fairness records,
the what-if's inputs from a workload log."""

from __future__ import annotations

import pandas as pd
import pytest

from collector.records import record_id
from probes.accounting.fairness import bucket_shares, fairness_by_bucket
from probes.pipeline.analytics import demand_table, whatif_cluster, whatif_jobs
from probes.pipeline.records import fairness_docs
from probes.sources.workloads.swf import Workload


def test_idle_demand_is_each_submitters_idle_cores() -> None:
    """The idle table has a row per autocluster and submitter: an autocluster two submitters
    share is their two rows, each with its own count; a row that names nobody is (unknown)'s."""
    idle = pd.DataFrame(
        {"request_cpus": [2.0, 2.0, 1.0, 1.0], "count": [3, 1, 4, 2], "submitter": ["a@p", "b@p", "c@p", None],
         "user": ["a", "b", "c", None]}
    )  # fmt: skip
    demand = demand_table(idle, 100.0)
    assert demand.groupby("submitter")["cpus"].sum().to_dict() == {"a@p": 6.0, "b@p": 2.0, "c@p": 4.0, "(unknown)": 2.0}
    assert demand_table(idle, 100.0, by="user").groupby("user")["cpus"].sum().to_dict()["a"] == 6.0
    assert (demand["observed_at"] == 100.0).all()


def test_fairness_records_carry_their_bucket_and_jain() -> None:
    allocations = pd.DataFrame({"observed_at": [0.0, 0.0], "user": ["a", "a"], "cpus": [2, 2]})
    demand = pd.DataFrame({"observed_at": [0.0], "user": ["b"], "cpus": [4.0]})
    shares = bucket_shares(allocations, demand, bucket_s=3600)
    docs = fairness_docs(shares, fairness_by_bucket(shares), pool="p", probe="test")["fairness"].decoded()
    assert [(d["name"], d["starved"], d["jain_served"]) for d in docs] == [("a", False, 0.5), ("b", True, 0.5)]
    assert docs[1]["id"] == record_id("fairness", "p", "user", "b", 0)
    assert docs[0]["bucket_end"] == 3600 and docs[0]["bucket_end_iso"] == "1970-01-01T01:00:00Z"
    assert fairness_docs(shares.iloc[:0], fairness_by_bucket(shares), pool="p", probe="test") == {}


def test_whatif_inputs_from_a_workload() -> None:
    jobs = pd.DataFrame({"qdate": [10.0, 20.0], "walltime_s": [100.0, 50.0]})
    requests = pd.DataFrame(
        {
            "job": [0, 0, 1],
            "count": [2.0, 1.0, 1.0],
            "cpus": [4.0, 2.0, 8.0],
            "properties": [("cluster=big", "x86_64"), ("cluster=big",), ()],
        }
    )
    machines = pd.DataFrame({"name": ["big", "small"], "count": [2, 4], "cpus": [16.0, 4.0], "speed": [1.0, 1.0]})
    cluster = whatif_cluster(machines, {"small": 2.0})
    assert cluster.values.tolist() == [["big", 1.0, 32.0], ["small", 2.0, 16.0]]
    out = whatif_jobs(Workload(jobs=jobs, requests=requests, variant="metacentrum"), cluster["set"])
    assert out[["submit", "cores", "runtime_s", "pinned"]].values.tolist() == [
        [10.0, 10.0, 100.0, "big"],
        [20.0, 8.0, 50.0, None],
    ]


def test_a_speed_for_an_unknown_class() -> None:
    from collector.errors import ConfigError

    machines = pd.DataFrame({"name": ["big"], "count": [1], "cpus": [4.0], "speed": [1.0]})
    with pytest.raises(ConfigError, match=r"--speed names classes \['huge'\]"):
        whatif_cluster(machines, {"huge": 2.0})
