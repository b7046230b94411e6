"""The SLOT_WEIGHT fit: exact on one machine class, the best max-of-linear weight on two (hand
checked), the expression parsed and evaluated by classad2 as the negotiator would."""

from __future__ import annotations

import classad2
import numpy as np
import pandas as pd
import pytest

from probes.accounting.machines import machines_table
from probes.accounting.penalty import PenaltyPolicy, job_penalties
from probes.accounting.slot_weight import (
    SlotWeight,
    billed_samples,
    class_weights,
    fit_slot_weight,
    slot_samples,
    slot_weight_error,
    standard_job_weight,
)

POLICY = PenaltyPolicy()


def jobs(rows: list[tuple[str, float, float, float]], disk: float = 0.0) -> pd.DataFrame:
    """(user, cores, MiB, walltime seconds) per job, one node each."""
    return pd.DataFrame(
        [
            {"user": u, "cpus": c, "memory": m, "disk": disk, "gpus": 0.0, "n_hosts": 1, "queue": None,
             "walltime_s": w, "speed": np.nan, "host": None}
            for u, c, m, w in rows
        ]
    )  # fmt: skip


def classad_rates(expression: str, samples: pd.DataFrame) -> list[float]:
    """The expression evaluated by classad2 in a slot ad per sample, as the negotiator does."""
    tree = classad2.ExprTree(expression)
    ads = [classad2.ClassAd({"Cpus": float(c), "Memory": float(m), "Disk": float(d)})
           for c, m, d in samples[["cpus", "memory", "disk"]].itertuples(index=False)]  # fmt: skip
    return [float(tree.eval(ad)) for ad in ads]


def test_one_class_is_exact_and_classad2_agrees() -> None:
    # 16 cores and 64 GiB per node, cost 1: PE = max(cores x 1, MiB x 16 / 65536)
    machines = machines_table([{"name": "c16", "cpus": 16, "memory": 65536, "disk": 1e8}])
    priced = job_penalties(
        jobs([("a", 4, 8192, 100), ("a", 1, 16384, 50), ("b", 2, 65536, 10), ("b", 8, 0, 10)]), machines, POLICY
    )
    assert priced.jobs["penalty"].tolist() == [4.0, 4.0, 16.0, 8.0]
    samples = slot_samples(priced, "penalty", policy=POLICY)
    weight = fit_slot_weight(samples, class_weights(machines, POLICY), resources=("cpus", "memory"))
    assert weight == SlotWeight(cpus=1.0, memory=16 / 65536)
    assert weight.expression() == "max({Cpus * 1, Memory * 0.000244140625})"
    assert classad_rates(weight.expression(), samples) == weight.rates(samples).tolist() == [4.0, 4.0, 16.0, 8.0]
    error = slot_weight_error(samples, weight)
    assert (error.jobs, error.mean_abs_rel_error, error.within, error.usage_error, error.total_error) == (
        4,
        0.0,
        1.0,
        0.0,
        0.0,
    )
    assert error.users["error_pct"].tolist() == [0.0, 0.0]
    # with only the class's own weight to start from, the fit finds it too (no start at all)
    assert fit_slot_weight(samples, resources=("cpus", "memory")) == weight


def test_disk_priced_takes_a_disk_term() -> None:
    policy = PenaltyPolicy(resources=("cpus", "memory", "disk"))
    machines = machines_table([{"name": "c16", "cpus": 16, "memory": 65536, "disk": 1e8}])
    priced = job_penalties(jobs([("a", 1, 1024, 100)], disk=5e7), machines, policy)  # half the disk: 8
    samples = slot_samples(priced, "penalty", policy=policy)
    weight = fit_slot_weight(samples, class_weights(machines, policy))
    assert weight == SlotWeight(cpus=1.0, memory=16 / 65536, disk=16 / 1e8)
    assert weight.expression() == "max({Cpus * 1, Memory * 0.000244140625, Disk * 1.6e-07})"
    assert classad_rates(weight.expression(), samples) == pytest.approx([8.0], rel=1e-12)


def test_two_classes_the_best_weight_and_its_error() -> None:
    # A: 4 cores, 4 GiB, cost 1 -> max(c, m / 1024); B: 4 cores, 16 GiB, cost 2 -> max(2c, m / 2048)
    machines = machines_table([{"name": "A", "cpus": 4, "memory": 4096, "node_cost": 1},
                               {"name": "B", "cpus": 4, "memory": 16384, "node_cost": 2}])  # fmt: skip
    # j1 (1 core, 1 GiB): A 1, B 2 -> 1; j2 (1, 8 GiB): only B, max(2, 4) = 4; j3 (2, 6 GiB): only B, max(4, 3) = 4
    priced = job_penalties(jobs([("u1", 1, 1024, 100), ("u2", 1, 8192, 100), ("u2", 2, 6144, 200)]), machines, POLICY)
    assert priced.jobs["penalty"].tolist() == [1.0, 4.0, 4.0]
    samples = slot_samples(priced, "penalty", policy=POLICY)
    weight = fit_slot_weight(samples, class_weights(machines, POLICY), resources=("cpus", "memory"))
    # max(a c, b m): j2 alone sets b = 4 / 8192 (its memory term); then j1 costs 100 x |a - 1|
    # and j3 200 x (4 - max(2a, 3)): 700 - 300 a on [1.5, 2], least at a = 2 (100 s of error;
    # A's weight max(c, m / 1024) costs 400 + 400, a = 1 with b = 1/2048 costs 200)
    assert weight == SlotWeight(cpus=2.0, memory=1 / 2048)
    assert classad_rates(weight.expression(), samples) == [2.0, 4.0, 4.0]
    error = slot_weight_error(samples, weight)
    assert error.jobs == 3
    assert error.mean_abs_rel_error == pytest.approx(1 / 3)  # j1 twice its metric
    assert error.within == pytest.approx(2 / 3)
    assert error.usage_error == pytest.approx(100 / 1300)  # usages 100 + 400 + 800
    assert error.total_error == pytest.approx(100 / 1300)
    users = error.users.set_index("user")
    assert users.index.tolist() == ["u1", "u2"]  # the worst first
    assert users.loc["u1", ["metric_usage", "weight_usage", "error_pct"]].tolist() == [100.0, 200.0, 100.0]
    assert users.loc["u2", ["metric_usage", "weight_usage", "error_pct"]].tolist() == [1200.0, 1200.0, 0.0]
    assert users.loc["u1", "metric_share"] == pytest.approx(100 / 13) and users.loc[
        "u1", "weight_share"
    ] == pytest.approx(100 / 7)


def test_the_standard_job_is_its_own_weight() -> None:
    machines = machines_table([{"name": "A", "cpus": 4, "memory": 4096}, {"name": "B", "cpus": 8, "memory": 65536}])
    priced = job_penalties(jobs([("u", 1, 4096, 10), ("u", 3, 1024, 10)]), machines, POLICY)
    samples = slot_samples(priced, "standard-job", policy=POLICY)
    assert samples["rate"].tolist() == [4.0, 3.0]  # max(cores / 1, MiB / 1024)
    weight = fit_slot_weight(samples, [standard_job_weight(POLICY)], resources=("cpus", "memory"))
    assert weight.expression() == "max({Cpus * 1, Memory * 0.0009765625})"
    assert slot_weight_error(samples, weight).usage_error == 0.0


def test_billed_samples_price_the_bill_as_a_share_of_the_node() -> None:
    nodes = pd.DataFrame({"name": ["n"], "total_cpus": [16.0], "total_memory": [32768.0], "total_disk": [1e6]})
    bills = pd.DataFrame(
        {"parent": ["n", "n", "gone"], "user": ["a", "b", "c"], "interval_s": [300.0, 300.0, 300.0],
         "cpus": [4.0, 12.0, 1.0], "memory": [2048.0, 8192.0, 1.0], "disk": [1.0, 1.0, 1.0],
         "billed_cpus": [4.0, 12.0, np.nan], "billed_memory": [6553.6, 26214.4, np.nan],
         "billed_disk": [5e5, 5e5, np.nan]}
    )  # fmt: skip
    samples = billed_samples(nodes, bills)
    # a: max(4/16, 6553.6/32768) x 16 = 4; b: max(12/16, 0.8) x 16 = 12.8; c: no node, left out
    assert samples["user"].tolist() == ["a", "b"]
    assert samples["rate"].tolist() == pytest.approx([4.0, 12.8])
    assert samples["walltime_s"].tolist() == [300.0, 300.0]
    # the disk is billed half to each, but the penalty does not price disk unless asked
    assert billed_samples(nodes, bills, resources=("cpus", "memory", "disk"))["rate"].tolist() == pytest.approx(
        [8.0, 12.8]
    )


def test_billed_samples_of_several_instants_find_the_node_of_their_own() -> None:
    # one node dumped twice, its memory 32768 MiB then 16384 MiB (bill() with keys=observed_at
    # names it once per instant): b's 4 cores and 8192 MiB are max(4/16, 8192/16384) x 16 = 8
    # cores of the second node, where the first would make them max(4/16, 8192/32768) x 16 = 4
    nodes = pd.DataFrame(
        {"name": ["n", "n"], "observed_at": [100.0, 400.0], "total_cpus": [16.0, 16.0],
         "total_memory": [32768.0, 16384.0], "total_disk": [1e6, 1e6]}
    )  # fmt: skip
    bills = pd.DataFrame(
        {"parent": ["n", "n"], "observed_at": [100.0, 400.0], "user": ["a", "b"], "interval_s": [300.0, 300.0],
         "cpus": [4.0, 4.0], "memory": [2048.0, 8192.0], "disk": [1.0, 1.0],
         "billed_cpus": [4.0, 4.0], "billed_memory": [6553.6, 8192.0], "billed_disk": [5e5, 5e5]}
    )  # fmt: skip
    samples = billed_samples(nodes, bills, keys=("observed_at",))
    assert samples["user"].tolist() == ["a", "b"] and samples["rate"].tolist() == pytest.approx([4.0, 8.0])
    with pytest.raises(ValueError, match=r"repeated slot keys \['name'\]"):  # named twice, no instant to tell
        billed_samples(nodes, bills)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: fit_slot_weight(s.assign(walltime_s=0.0)), "no usage to fit"),
        (lambda s: fit_slot_weight(s, resources=("gpus",)), r"some of \['cpus', 'memory', 'disk'\], got \['gpus'\]"),
        (lambda s: fit_slot_weight(s.drop(columns="rate")), r"samples table is missing columns \['rate'\]"),
        (lambda s: SlotWeight(cpus=-1.0), "cpus coefficient of a slot weight must be a number >= 0, got -1.0"),
    ],
)
def test_bad_input_is_named(call, match: str) -> None:  # type: ignore[no-untyped-def]
    samples = pd.DataFrame({"job": [0], "user": ["u"], "count": [1.0], "cpus": [1.0], "memory": [1.0], "disk": [0.0],
                            "walltime_s": [10.0], "rate": [1.0]})  # fmt: skip
    with pytest.raises(ValueError, match=match):
        call(samples)


def test_an_empty_weight_prints_zero() -> None:
    assert SlotWeight().expression() == "0" and SlotWeight(memory=0.5).expression() == "Memory * 0.5"
