"""The lab reproduces seed 002's Table 2.1 and its cases' qualitative claims, and compares
them with Maui's fairshare. The loads are the seed's own (Tables 5.1-5.6, with the burst
windows stated in probes/accounting/lab/loads.py); nothing here is random."""

from __future__ import annotations

import numpy as np
import pytest

from probes.accounting.lab.loads import CASES
from probes.accounting.lab.share import MauiFairshare, QueueProportional
from probes.accounting.lab.simulate import POLICIES, run_case, run_lab, simulate, table_2_1, task_penalties


def test_table_2_1_exactly() -> None:
    t = table_2_1()
    # the seed prints the shares cut to two decimals: 0.60, 0.63, 5.40, 5.36 (5.368...)
    assert (np.floor(t["share"] * 100) / 100).tolist() == [0.60, 5.40, 0.63, 5.36]
    assert t["nodes"].tolist() == [0, 5, 0, 5]
    assert t["queue"].tolist() == [10, 90, 10, 85]  # c1 waits, c2 ran 5 of its 90


def test_queue_proportional_never_gives_more_than_formula_2_1() -> None:
    queues = np.array([3, 7, 990])
    r = QueueProportional().allocate(queues, 500)
    assert r.tolist() == [1, 3, 495]  # floor(3/1000*500)=1, floor(3.5)=3, floor(495)=495
    assert QueueProportional().allocate(np.array([2, 0]), 500).tolist() == [2, 0]  # never more than the queue


def run(case: str, policy: str = "queue_proportional"):  # type: ignore[no-untyped-def]
    r = run_case(CASES[case], policy)
    return r, r.slots.pivot(index="t", columns="user", values="nodes")


def test_case_1_the_burst_takes_the_pool_until_the_queues_match() -> None:
    r, nodes = run("1")
    assert (nodes.loc[1:10, "c1"] == 500).all()  # alone, c1 has every node
    # from the burst on c5 holds the majority of the pool (Figure 6.2) ...
    assert (nodes.loc[11:30, "c5"] > 250).all()
    # ... and it stays that way while c5's queue is the larger (Figure 6.3)
    queues = r.slots.pivot(index="t", columns="user", values="queue")
    larger = queues["c5"] > queues["c1"]
    assert (nodes["c5"][larger] >= nodes["c1"][larger]).all()


def test_case_2a_the_heavier_complementary_user_dominates_in_the_long_run() -> None:
    _, nodes = run("2a")
    late = nodes.loc[50:100]
    assert late["c4"].mean() > 1.5 * late["c3"].mean()


def test_case_3_the_low_users_allocation_declines_as_the_other_grows() -> None:
    _, nodes = run("3")
    assert nodes.loc[2, "c2"] > nodes.loc[40, "c2"] > 0  # Figure 6.8


def test_case_4_steady_loads_get_steady_allocations() -> None:
    _, nodes = run("4")
    assert nodes.loc[10:100, "c2"].nunique() <= 2  # Figure 6.9: flat (up to rounding)


def test_case_5_the_early_riser_keeps_the_pool_until_the_latecomer_builds_a_queue() -> None:
    r, nodes = run("5")
    assert nodes.loc[11, "c7"] > 10 * nodes.loc[11, "c8"]
    assert r.users.set_index("user").loc["c8", "starved_slots"] > 0


def test_formula_2_1_serves_every_queue_the_same_part() -> None:
    """Section 7's "false sense of fairness": Jain's index of the served part is 1 under the
    queue-proportional share in every case, while the allocations themselves are unequal."""
    for case in CASES:
        r = run_case(CASES[case])
        assert r.jain_served > 0.99, case
    assert run_case(CASES["3"]).jain_allocation < 0.7


def test_maui_fairshare_lets_the_light_user_finish_first() -> None:
    """Cases 3 and 4: under formula 2.1 the light user c2 finishes with the heavy one; under
    Maui's fairshare (equal targets) it finishes when it stops submitting."""
    for case in ("3", "4"):
        proportional = run_case(CASES[case]).users.set_index("user")
        fair = run_case(CASES[case], "fairshare").users.set_index("user")
        assert fair.loc["c2", "completion"] <= 101 < proportional.loc["c2", "completion"], case
    assert run_case(CASES["3"]).users.set_index("user").loc["c2", "starved_slots"] > 0
    assert run_case(CASES["3"], "fairshare").users.set_index("user").loc["c2", "starved_slots"] == 0


def test_maui_fairshare_makes_the_incumbent_pay_for_its_history() -> None:
    """What the lab finds (not a claim of the seed): a decaying fairshare starves the user who
    ran alone before a burst (c1 in case 1) for a few slots, until the newcomer's usage
    catches up; formula 2.1, having no memory, does not."""
    assert run_case(CASES["1"], "fairshare").users.set_index("user").loc["c1", "starved_slots"] > 0
    assert run_case(CASES["1"]).users.set_index("user").loc["c1", "starved_slots"] == 0


def test_fairshare_follows_its_targets() -> None:
    loads = np.full((2, 50), 500, dtype=np.int64)  # both users always want the whole pool
    _, allocated = simulate(loads, MauiFairshare(["a", "b"], targets={"a": 75, "b": 25}), 100)
    share = allocated[:, 10:50].sum(axis=1) / allocated[:, 10:50].sum()
    assert share[0] == pytest.approx(0.75, abs=0.02)


def test_penalty_metric_charges_the_task_shape() -> None:
    # on 1-core 4 GiB nodes: 1 core + 2 GiB costs a node's core share (1), 1 core + 8 GiB two nodes' worth
    costs = task_penalties(
        {"small": {"cpus": 1, "memory": 2048}, "fat": {"cpus": 1, "memory": 8192}}, {"cpus": 1, "memory": 4096}
    )
    assert costs == {"small": 1.0, "fat": 2.0}


def test_the_whole_lab_runs() -> None:
    # its speed is benchmarks/' to measure, not a test's: a loaded machine is no slower a lab
    runs = run_lab()
    assert len(runs) == len(CASES) * len(POLICIES)


def test_unknown_policy_and_case() -> None:
    with pytest.raises(ValueError, match="policy must be one of queue_proportional"):
        run_case(CASES["1"], "lottery")
    with pytest.raises(ValueError, match=r"cases must be some of 1, 2, 2a, 3, 4, 5, got \['7'\]"):
        run_lab(["7"])
