"""Bills named after their jobs whatever the jobs' status, and claims of idle or held jobs apart
(probes/sources/job_identity.py), by hand; and what a schedd is asked for them
(probes/sources/live/schedds.py), against the fake daemons of test_live."""

from __future__ import annotations

import classad2
import numpy as np
import pandas as pd

from probes.pipeline.reading import live_pool
from probes.sources.job_identity import JOB_COLUMNS, adopt_job_identities, jobs_table, named_after_slots
from probes.sources.live.schedds import HISTORY_LOOKBACK_S
from tests.sources.test_live import FakeCollector, FakeSchedd, config

SLOT = ("group_phys.cms.alice.smith@pool", "smith", "group_phys.cms.alice", None)  # what the slot's ad gives
JOB = ("group_phys.cms.alice.smith@pool", "alice.smith", "group_phys.cms", "ProjX")  # what the job's ad gives


def allocations(*job_ids: str) -> pd.DataFrame:
    return pd.DataFrame(
        [(j, *SLOT, 2) for j in job_ids], columns=["job_id", "submitter", "user", "group", "project", "cpus"]
    )


def jobs(rows: list[tuple[str, tuple[object, ...], object]]) -> pd.DataFrame:
    names = {k: np.array([r[1][i] for r in rows], dtype=object) for i, k in enumerate(JOB_COLUMNS[1:5])}
    return jobs_table([r[0] for r in rows], names, [r[2] for r in rows])


def test_a_bill_takes_its_jobs_names_whatever_its_status() -> None:
    # running, completed but still in the queue, removed, read from the history: the same names
    answer = jobs([("s#1.0", JOB, 2), ("s#2.0", JOB, 4), ("s#3.0", JOB, 3), ("s#4.0", JOB, None)])
    billed, apart = adopt_job_identities(allocations("s#1.0", "s#2.0", "s#3.0", "s#4.0", "s#9.0"), answer)
    assert [tuple(r) for r in billed[["submitter", "user", "group", "project"]].itertuples(index=False)] == [
        *[JOB] * 4,
        SLOT,  # a job no schedd knows keeps its slot's names
    ]
    assert billed["cpus"].tolist() == [2] * 5 and apart.empty


def test_a_name_the_job_lacks_keeps_the_slots() -> None:
    answer = jobs([("s#1.0", (JOB[0], JOB[1], JOB[2], None), 2)])
    billed, _ = adopt_job_identities(allocations("s#1.0"), answer)
    assert tuple(billed.loc[0, ["submitter", "user", "group", "project"]]) == (*JOB[:3], None)


def test_claims_of_idle_or_held_jobs_are_not_billed_but_kept_apart() -> None:
    answer = jobs([("s#1.0", JOB, 2), ("s#2.0", JOB, 1), ("s#3.0", JOB, 5)])
    billed, apart = adopt_job_identities(allocations("s#1.0", "s#2.0", "s#3.0"), answer)
    assert billed["job_id"].tolist() == ["s#1.0"]
    assert apart[["job_id", "job_status", "cpus"]].to_numpy().tolist() == [["s#2.0", "idle", 2], ["s#3.0", "held", 2]]
    assert apart["user"].tolist() == ["alice.smith"] * 2  # named as their jobs


def test_a_bill_under_its_slots_names_is_said_per_schedd_with_why() -> None:
    """Issue 50, point 6: a schedd that answered late or not at all left its claims' bills under
    the slots' names (john.smith billed as smith, no project) and the probe exited 0 in silence."""
    answer = jobs([("a#1.0", JOB, 2)])
    claimed = {"a#1.0", "a#2.0", "b#1.0", "b#2.0", "c#7.0"}
    said = named_after_slots(claimed, answer, {"schedd:b": "schedd b: running jobs: no answer within 30 s"})
    assert said == {
        "schedd:a (jobs' names)": "1 claim(s) billed under their slots' names, not their jobs' (a user with a dot "
        "cut, no project), e.g. a#2.0: it listed none of these jobs (in its queue or its recent history)",
        "schedd:b (jobs' names)": "2 claim(s) billed under their slots' names, not their jobs' (a user with a dot "
        "cut, no project), e.g. b#1.0: schedd b: running jobs: no answer within 30 s",
        "schedd:c (jobs' names)": "1 claim(s) billed under their slots' names, not their jobs' (a user with a dot "
        "cut, no project), e.g. c#7.0: it listed none of these jobs (in its queue or its recent history)",
    }
    assert named_after_slots({"a#1.0"}, answer, {}) == {}  # every bill named after its job: nothing to say


def test_no_answer_changes_nothing() -> None:
    table = allocations("s#1.0")
    billed, apart = adopt_job_identities(table, jobs_table([], None))
    assert billed is table and apart.empty and "job_status" in apart


# -- the schedd's answer: running jobs, then the claimed ones whatever their status ----------------------------


def job_ad(n: int, status: int, entered: float) -> classad2.ClassAd:
    return classad2.ClassAd(
        {
            "GlobalJobId": f"vm#{n}.0#1795260000", "JobStatus": status, "EnteredCurrentStatus": int(entered),
            "Owner": "condorpool", "User": "condorpool@pool", "AccountingGroup": "group_phys.cms.alice.smith",
            "AcctGroup": "group_phys.cms", "AcctGroupUser": "alice.smith", "ProjectName": "ProjX",
        }
    )  # fmt: skip


def test_a_schedd_is_asked_for_its_claimed_jobs_in_its_queue_then_its_recent_history() -> None:
    now = 1795270000.0
    queue = [job_ad(1, 2, now - 100), job_ad(2, 5, now - 5), job_ad(3, 4, now - 2)]
    history = [job_ad(4, 4, now - 60), job_ad(5, 4, now - 2 * HISTORY_LOOKBACK_S)]  # newest first
    vm = FakeSchedd("vm", queue, history)
    pool = live_pool(config(), collector_factory=lambda *_: FakeCollector(), schedd_factory=lambda _: vm)
    claimed = {f"vm#{n}.0#1795260000" for n in (1, 2, 3, 4, 5)} | {"other#9.0#1795260000"}
    jobs, failures = pool.job_identities([("vm", vm.location())], claimed, now=now)
    assert failures == {}
    asked = [(c["call"], c["constraint"]) for c in vm.calls]
    assert asked == [
        ("query", "JobStatus == 2"),
        (
            "query",
            'member(GlobalJobId, {"vm#2.0#1795260000", "vm#3.0#1795260000", "vm#4.0#1795260000", "vm#5.0#1795260000"})',
        ),
        ("history", 'member(GlobalJobId, {"vm#4.0#1795260000", "vm#5.0#1795260000"})'),
    ]  # fmt: skip; the other schedd's job is not asked of this one
    assert vm.calls[2]["match"] == 2 and vm.calls[2]["since"] == f"EnteredCurrentStatus < {int(now - 3600)}"
    # job 5 left the queue two hours ago: past the scan's end, its claim keeps its slot's names
    assert jobs[["job_id", "status"]].to_numpy().tolist() == [[f"vm#{n}.0#1795260000", s] for n, s in
                                                              ((1, 2), (2, 5), (3, 4), (4, 4))]  # fmt: skip
    assert set(map(tuple, jobs[list(JOB_COLUMNS[1:5])].to_numpy().tolist())) == {JOB}
