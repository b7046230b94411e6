"""The multi-resource penalty and the metrics it replaces (seed 000, section 3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.accounting import (
    PenaltyPolicy,
    compare_metrics,
    job_penalties,
    machines_table,
    node_requests,
    price_requests,
)
from probes.accounting.penalty import pin_mask

from .tables import GIB

# Seed 000, Example 3: "10 nodes of type 1" with 8 CPUs and 16 GB, "1 nodes of type 2" with
# 80 CPUs and 512 GB: 160 CPUs and 672 GB in all (GB taken as GiB, HTCondor's MiB x 1024).
SMALL = {"name": "small", "count": 10, "cpus": 8, "memory": 16 * GIB}
LARGE = {"name": "large", "count": 1, "cpus": 80, "memory": 512 * GIB}
SEED_POOL = machines_table([SMALL, LARGE])


def jobs_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Jobs that asked for what ``rows`` say; one node each, an hour of walltime, no host."""
    records = []
    for i, row in enumerate(rows):
        record: dict[str, Any] = {
            "job_id": f"schedd#{i}.0#0", "user": "alice", "queue": None, "cpus": 1.0, "memory": 0.0,
            "disk": np.nan, "gpus": 0.0, "n_hosts": 1, "walltime_s": 3600.0, "speed": np.nan, "host": None,
        }  # fmt: skip
        record.update(row)
        records.append(record)
    return pd.DataFrame.from_records(records)


def penalties(rows: list[dict[str, Any]], machines: pd.DataFrame = SEED_POOL, **policy: Any) -> pd.DataFrame:
    return job_penalties(jobs_table(rows), machines, PenaltyPolicy(**policy)).jobs


def test_seed_example_3_ram_heavy_job() -> None:
    (job,) = penalties([{"cpus": 1, "memory": 512 * GIB}]).to_dict("records")
    # Moab's PE (formula 3): max(1/160, 512/672) * 160 = 121.9
    assert job["global_pe"] == pytest.approx(512 / 672 * 160)
    assert round(job["global_pe"], 1) == 121.9
    # only the large node holds 512 GB: max(1/80, 512/512) * 80 = 80, the whole node
    assert job["penalty"] == 80.0
    assert job["cpu_only"] == 1.0
    # standard job of 1 core and 1 GiB: max(1/1, 512/1) = 512
    assert job["standard_job"] == 512.0


def test_seed_example_4_cpu_heavy_job() -> None:
    (job,) = penalties([{"cpus": 80, "memory": 80 * GIB}]).to_dict("records")
    # max(80/160, 80/672) * 160 = 80
    assert job["global_pe"] == pytest.approx(80.0)
    # max(80/80, 80/512) * 80 = 80: the RAM-heavy and the CPU-heavy job occupy the same node,
    # and now pay the same
    assert job["penalty"] == 80.0


def test_seed_example_5_local_pe_is_8_on_the_small_node_and_2_5_on_the_large() -> None:
    request = node_requests(jobs_table([{"cpus": 1, "memory": 16 * GIB}]))
    # max(1/8, 16/16) * 8 = 8
    small, _ = price_requests(request, machines_table([SMALL]))
    assert small["price"].tolist() == [8.0]
    # max(1/80, 16/512) * 80 = 2.5
    large, _ = price_requests(request, machines_table([LARGE]))
    assert large["price"].tolist() == [2.5]
    # the penalty is the cheapest, whichever node the job ran on (formula 5)
    both, _ = price_requests(request, SEED_POOL)
    assert both[["price", "priced_on", "n_fit"]].values.tolist() == [[2.5, "large", 2]]
    ran_small = penalties([{"cpus": 1, "memory": 16 * GIB, "host": "small3.example.org"}])
    assert ran_small["penalty"].tolist() == [2.5]


def test_node_cost_and_queue_cost_multiply() -> None:
    job = {"cpus": 1, "memory": 16 * GIB, "queue": "long"}
    # large nodes cost 2: min(8 x 1, 2.5 x 2) = 5; then the queue's 1.5: 7.5
    pool = machines_table([SMALL, {**LARGE, "node_cost": 2.0}])
    assert penalties([job], pool, queue_costs={"long": 1.5})["penalty"].tolist() == [7.5]
    # large nodes cost 4: 2.5 x 4 = 10 > 8, the small node is now the cheapest
    pool = machines_table([SMALL, {**LARGE, "node_cost": 4.0}])
    out = job_penalties(jobs_table([job, {**job, "queue": "short"}]), pool, PenaltyPolicy(queue_costs={"long": 1.5}))
    assert out.requests["priced_on"].tolist() == ["small", "small"]
    # 8 x 1.5 = 12 in the long queue; the short queue costs the default 1.0
    assert out.jobs["penalty"].tolist() == [12.0, 8.0]
    assert out.jobs["queue_cost"].tolist() == [1.5, 1.0]
    # the metrics it replaces carry neither cost
    assert out.jobs["cpu_only"].tolist() == [1.0, 1.0]


def test_a_two_node_job_pays_the_sum_of_its_two_cheapest_prices() -> None:
    jobs = jobs_table([{"cpus": 81}])  # what the jobs table says is replaced by the requests
    requests = pd.DataFrame(
        {
            "job": [0, 0],
            "count": [1, 1],
            "cpus": [1.0, 80.0],
            "memory": [16 * GIB, 80 * GIB],
            "disk": np.nan,
            "gpus": 0.0,
            "exclusive": False,
            "properties": [(), ()],
        }
    )
    out = job_penalties(jobs, SEED_POOL, requests=requests)
    # node 1: 2.5 on the large node; node 2: 80 on the large node; P = 2.5 + 80 = 82.5
    assert out.requests["price"].tolist() == [2.5, 80.0]
    assert out.jobs["penalty"].tolist() == [82.5]
    assert out.jobs["cpu_only"].tolist() == [81.0]
    # Moab's PE adds the nodes up: max(81/160, 96/672) * 160 = 81
    assert out.jobs["global_pe"].tolist() == pytest.approx([81.0])


def test_nodes_of_one_request_are_each_priced_on_their_own() -> None:
    # "2:ppn=1" with 16 GB each: formula 8 prices each node at its cheapest, 2.5 + 2.5 = 5,
    # although the pool has one large node: the count of nodes in a class is no constraint
    (job,) = penalties([{"cpus": 1, "memory": 16 * GIB, "n_hosts": 2}]).to_dict("records")
    assert job["penalty"] == 5.0
    assert job["cpu_only"] == 2.0
    assert job["standard_job"] == 32.0  # 2 x max(1/1, 16/1)


def test_an_exclusive_request_costs_the_whole_node() -> None:
    jobs = jobs_table([{"cpus": 1, "memory": GIB}])
    requests = node_requests(jobs).assign(exclusive=True)
    out = job_penalties(jobs, SEED_POOL, requests=requests)
    # a whole small node is 8 x 1 = 8, a whole large one 80: the small one is cheaper
    assert out.requests[["price", "priced_on"]].values.tolist() == [[8.0, "small"]]
    # without exclusivity: max(1/8, 1/16) * 8 = 1 on a small node, max(1/80, 1/512) * 80 = 1
    assert penalties([{"cpus": 1, "memory": GIB}])["penalty"].tolist() == [1.0]


@pytest.mark.parametrize(
    ("pins", "price", "on"),
    [
        ((), 2.5, "large"),
        (("cluster=small",), 8.0, "small"),  # cl_small: pinned to the dearer class
        (("^cluster=large",), 8.0, "small"),
        (("host=small7.example.org",), 8.0, "small"),  # a node of the small cluster
        (("host=large",), 2.5, "large"),
        (("^host=large1.example.org",), 8.0, "small"),  # the only large node is ruled out
        (("^host=small1.example.org",), 2.5, "large"),  # nine other small nodes remain
        (("cpus=8",), 8.0, "small"),  # MetaCentrum's nodecpus8
        (("brno",), 2.5, "large"),  # no class lists it: cannot be checked, ignored
    ],
)
def test_pinned_properties_must_match(pins: tuple[str, ...], price: float, on: str) -> None:
    jobs = jobs_table([{"cpus": 1, "memory": 16 * GIB}])
    requests = node_requests(jobs).assign(properties=[pins])
    out = job_penalties(jobs, SEED_POOL, requests=requests)
    assert out.requests[["price", "priced_on"]].values.tolist() == [[price, on]]
    assert out.unchecked == ({"brno": 1} if pins == ("brno",) else {})


def test_properties_that_a_class_lists_are_checked() -> None:
    pool = machines_table([{**SMALL, "properties": {"ssd", "brno"}}, {**LARGE, "properties": {"brno"}}])
    mask, unchecked = pin_mask(["ssd", "brno", "infiniband"], pool)
    assert mask.tolist() == [True, False] and unchecked == ["infiniband"]
    mask, _ = pin_mask(["^ssd"], pool)
    assert mask.tolist() == [False, True]


def test_a_job_that_fits_nowhere_is_priced_and_flagged() -> None:
    jobs = jobs_table(
        [
            {"cpus": 1, "memory": 600 * GIB},  # more than any node has
            {"cpus": 1, "memory": 600 * GIB, "host": "slot1_1@small4.example.org"},
            {"cpus": 1, "memory": 16 * GIB},
        ]
    )
    pool = machines_table([{**SMALL, "hosts": ("small4.example.org",)}, LARGE])
    out = job_penalties(jobs, pool)
    # nearest: beyond one node, max(1/80, 600/512) * 80 = 93.75 on large, not
    # max(1/8, 600/16) * 8 = 300 on small; where it ran (small4) is known: 300 there
    assert out.requests["price"].tolist() == [93.75, 300.0, 2.5]
    assert out.requests["priced_as"].tolist() == ["nearest", "ran_on", "cheapest"]
    assert out.jobs["unmatched"].tolist() == [True, True, False]
    assert [x if isinstance(x, str) else None for x in out.jobs["ran_on"]] == [None, "small", None]
    assert len(out.jobs) == 3  # nobody is dropped


def test_gpus_fit_always_and_enter_the_max_with_their_relaxation_weight() -> None:
    gpu = {"name": "gpu", "count": 2, "cpus": 32, "memory": 128 * GIB, "gpus": 4}
    pool = machines_table([SMALL, gpu])
    job = {"cpus": 1, "memory": 4 * GIB, "gpus": 4}
    # by default GPUs only have to fit: max(1/32, 4/128) * 32 = 1 on the GPU node
    assert penalties([job], pool)["penalty"].tolist() == [1.0]
    # all 4 GPUs of the node: 4/4 * 32 = 32; relaxed by 0.25: 8
    assert penalties([job], pool, resources=("cpus", "memory", "gpus"))["penalty"].tolist() == [32.0]
    assert penalties([job], pool, resources=("cpus", "memory", "gpus"), gpu_weight=0.25)["penalty"].tolist() == [8.0]
    # 5 GPUs fit nowhere: priced on the nearest class, flagged
    out = job_penalties(jobs_table([{**job, "gpus": 5}]), pool)
    assert out.jobs["unmatched"].tolist() == [True]
    # a GPU job never fits a node without GPUs: the small node is no choice even pinned there
    pinned = node_requests(jobs_table([job])).assign(properties=[("cluster=small",)])
    assert job_penalties(jobs_table([job]), pool, requests=pinned).requests["fits"].tolist() == [False]


def test_walltime_is_normalized_by_the_speed_of_the_host() -> None:
    pool = machines_table([{**SMALL, "speed": 8.0, "hosts": ("small1",)}, {**LARGE, "speed": 12.0}])
    jobs = jobs_table(
        [
            {"cpus": 1, "memory": 16 * GIB, "speed": 10.5},  # the job's own record
            {"cpus": 1, "memory": 16 * GIB, "host": "slot1_3@small1"},  # its host's class
            {"cpus": 1, "memory": 16 * GIB},  # unknown
        ]
    )
    out = job_penalties(jobs, pool).jobs
    # 3600 s x speed x 2.5
    assert out["usage"].tolist() == [3600 * 10.5 * 2.5, 3600 * 8.0 * 2.5, 3600 * 1.0 * 2.5]
    assert out["speed_known"].tolist() == [True, True, False]


def test_compare_metrics_shows_who_gains_and_who_loses() -> None:
    jobs = jobs_table(
        [
            {"user": "ram", "cpus": 1, "memory": 512 * GIB},  # pays 80 instead of 1
            {"user": "cpu", "cpus": 80, "memory": 80 * GIB},  # pays 80 as before
        ]
    )
    users = compare_metrics(job_penalties(jobs, SEED_POOL).jobs).set_index("user")
    # usage: 3600 x 80 each; cpu_only: 3600 x 1 and 3600 x 80
    assert users.loc["ram", "ratio"] == 80.0 and users.loc["cpu", "ratio"] == 1.0
    # shares: 50 % each under the penalty; 1/81 and 80/81 under cpu_only
    assert users.loc["ram", "share"] == 50.0
    assert users.loc["ram", "cpu_only_share"] == pytest.approx(100 / 81)
    assert users.loc["ram", "change"] == pytest.approx(50 - 100 / 81)
    assert users.loc["cpu", "change"] == pytest.approx(50 - 8000 / 81)


def test_whole_arrays_agree_with_a_loop_on_a_mixed_workload() -> None:
    """Many requests, some repeated (the distinct ones are priced once), in several chunks."""
    rng = np.random.default_rng(4)
    n = 20_000
    pool = machines_table(
        [{"name": f"m{i}", "cpus": c, "memory": c * m, "gpus": g, "node_cost": k}
         for i, (c, m, g, k) in enumerate([(8, 2048, 0, 1), (32, 4096, 4, 1.5), (64, 8192, 0, 1), (12, 7000, 2, 1)])]
    )  # fmt: skip
    requests = pd.DataFrame(
        {
            "job": np.arange(n),
            "count": 1.0,
            "cpus": rng.choice([1, 2, 4, 8, 12, 16, 32, 64, 65], n).astype(float),
            "memory": rng.choice([512, 2048, 8000, 30000, 100000, 600000], n).astype(float),
            "disk": np.nan,
            "gpus": rng.choice([0, 0, 0, 1, 3], n).astype(float),
            "exclusive": rng.random(n) < 0.1,
            "properties": [(), ("cluster=m3",), ("^cluster=m1",)] * (n // 3) + [()] * (n % 3),
        }
    )
    priced, _ = price_requests(requests, pool)
    expected = [_reference_price(r, pool) for r in requests.head(900).itertuples()]
    fits = [e[1] for e in expected]
    assert priced["fits"].head(900).tolist() == fits
    assert 50 < sum(fits) < 850  # both kinds are tested
    got = priced["price"].head(900)[fits].tolist()
    assert got == pytest.approx([e[0] for e in expected if e[1]])


def _reference_price(r: Any, pool: pd.DataFrame) -> tuple[float, bool]:
    """Formula 7 and the min of formula 8, one class at a time."""
    best = np.inf
    for m in pool.itertuples():
        if r.cpus > m.cpus or r.memory > m.memory or r.gpus > m.gpus:
            continue
        if r.properties == ("cluster=m3",) and m.name != "m3":
            continue
        if r.properties == ("^cluster=m1",) and m.name == "m1":
            continue
        pe = m.cpus * m.node_cost if r.exclusive else max(r.cpus / m.cpus, r.memory / m.memory) * m.cpus * m.node_cost
        best = min(best, pe)
    if np.isfinite(best):
        return best, True
    return float("nan"), False


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 100), st.floats(0, 700 * GIB), st.floats(0.5, 4)),
        min_size=1,
        max_size=30,
    )
)
def test_a_fitting_request_pays_at_least_its_cores_and_at_most_a_whole_node(
    rows: list[tuple[int, float, float]],
) -> None:
    pool = machines_table([{**SMALL, "node_cost": 1.0}, {**LARGE, "node_cost": 1.0}])
    out = job_penalties(jobs_table([{"cpus": c, "memory": m} for c, m, _ in rows]), pool)
    jobs, requests = out.jobs, out.requests
    assert len(jobs) == len(rows)
    fits = requests["fits"].to_numpy()
    # PE >= req cpus / avail cpus x avail cpus = req cpus (node cost 1), and <= a whole node
    assert (jobs["penalty"][fits] >= jobs["cpu_only"][fits] - 1e-9).all()
    node = np.where(requests["priced_on"] == "large", 80.0, 8.0)
    assert (requests["price"][fits] <= node[fits] + 1e-9).all()
    assert np.isfinite(jobs["penalty"]).all()  # the unfitting ones are priced too
    assert (jobs["unmatched"].to_numpy() == ~fits).all()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: PenaltyPolicy(resources=("cpu",)), r"penalty resources must be some of"),
        (lambda: PenaltyPolicy(gpu_weight=-1), r"gpu_weight must be a number >= 0, got -1"),
        (lambda: PenaltyPolicy(standard_job={"cpus": 0}), r"at least one > 0"),
        (
            lambda: PenaltyPolicy(queue_costs={"q": 0}),
            r"the cost of queue 'q' must be a number greater than 0, got 0.0",
        ),
        (
            lambda: price_requests(node_requests(jobs_table([{}])), pd.DataFrame({"name": [], "cpus": []})),
            r"machines table is empty",
        ),
        (lambda: price_requests(node_requests(jobs_table([{"cpus": -1}])), SEED_POOL), r"negative resource amounts"),
        (
            lambda: job_penalties(jobs_table([{}, {}]), SEED_POOL, requests=node_requests(jobs_table([{}]))),
            r"jobs table: 1 job\(s\) have no node request, e.g. row 1",
        ),
        (
            lambda: job_penalties(jobs_table([{}]).drop(columns=["host"]), SEED_POOL),
            r"jobs table is missing columns \['host'\]",
        ),
    ],
)
def test_errors_name_the_input_and_what_was_expected(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
