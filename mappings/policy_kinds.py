"""The kinds of the fairshare policy: windows, fairness buckets and priority syncs."""

from __future__ import annotations

from mappings.fields import (
    BOOLEAN,
    DATES,
    DOC,
    DOUBLE,
    ENVELOPE,
    ID,
    KEYWORD,
    LONG,
    NONE,
    TEXT,
    TIME,
    Field,
    Kind,
)  # fmt: skip

__all__ = ["FAIRNESS", "FAIRSHARE", "PRIORITY"]

# fmt: off
FAIRSHARE = Kind(
    "fairshare",
    2,
    "fairacct fairshare records, one document per credential and fairshare window: usage, decayed usage, target and priority; monthly indices fairacct-fairshare-YYYY.MM by the record's own timestamp",
    (
        Field("policy", KEYWORD, "", ID, DOC, ""),
        Field("type", KEYWORD, "", ID, TEXT, ""),
        Field("name", KEYWORD, "", ID, TEXT, "Name (of the slot, node or credential)."),
        Field("window_start", TIME, "UNIX s", ID | DATES, DOC, ""),
        Field("decay", DOUBLE, "", NONE, DOC, ""),
        Field("decayed", DOUBLE, "", NONE, DOC, ""),
        Field("depth", LONG, "", NONE, DOC, ""),
        Field("effective", DOUBLE, "", NONE, DOC, ""),
        Field("interval_s", LONG, "s", NONE, DOC, "Seconds the snapshot stands for."),
        Field("metric", KEYWORD, "", NONE, DOC, ""),
        Field("off_target", BOOLEAN, "", NONE, DOC, ""),
        Field("over_cap", BOOLEAN, "", NONE, DOC, ""),
        Field("priority", DOUBLE, "", NONE, DOC, ""),
        Field("target", DOUBLE, "", NONE, DOC, ""),
        Field("target_mode", KEYWORD, "", NONE, DOC, ""),
        Field("total", DOUBLE, "", NONE, DOC, ""),
        Field("usage", DOUBLE, "", NONE, DOC, ""),
        Field("weight", DOUBLE, "", NONE, DOC, ""),
        Field("window", LONG, "", NONE, DOC, ""),
        Field("window_end", TIME, "UNIX s", NONE, DOC, ""),
        *ENVELOPE,
    ),
)


FAIRNESS = Kind(
    "fairness",
    3,
    "fairacct fairness records (Sedighi et al. 2014, \"Fairness of task scheduling in high performance computing environments\"), one document per credential and time bucket: idle demand and allocation in cores, the part served, the equal share, starvation, and the bucket's Jain indices; monthly indices fairacct-fairness-YYYY.MM by the record's own timestamp",
    (
        Field("pool", KEYWORD, "", ID, DOC, "HTCondor pool the probe watched."),
        Field("type", KEYWORD, "", ID, TEXT, ""),
        Field("name", KEYWORD, "", ID, TEXT, "Name (of the slot, node or credential)."),
        Field("bucket_start", TIME, "UNIX s", ID | DATES, DOC, ""),
        Field("allocation_cpus", DOUBLE, "cores", NONE, DOC, ""),
        Field("bucket_end", TIME, "UNIX s", NONE, DOC, ""),
        Field("demand_cpus", DOUBLE, "cores", NONE, DOC, ""),
        Field("group", KEYWORD, "", NONE, DOC, "Accounting group of the job."),
        Field("jain_allocation", DOUBLE, "", NONE, DOC, ""),
        Field("jain_served", DOUBLE, "", NONE, DOC, ""),
        Field("served", DOUBLE, "", NONE, DOC, ""),
        Field("share_cpus", DOUBLE, "cores", NONE, DOC, ""),
        Field("snapshots", LONG, "", NONE, DOC, ""),
        Field("starved", BOOLEAN, "", NONE, DOC, ""),
        Field("user", KEYWORD, "", NONE, DOC, "User the job was submitted for."),
        *ENVELOPE,
    ),
)


PRIORITY = Kind(
    "priority",
    2,
    "fairacct priority records, one document per credential and priority sync (or restore): the negotiator's priority factor or accumulated usage before and after, what the fairshare asked for, and whether it was set; monthly indices fairacct-priority-YYYY.MM by the record's own timestamp",
    (
        Field("pool", KEYWORD, "", ID, DOC, "HTCondor pool the probe watched."),
        Field("credential", KEYWORD, "", ID, DOC, ""),
        Field("sync_at", TIME, "UNIX s", ID | DATES, DOC, ""),
        Field("submitter", KEYWORD, "", NONE, TEXT, "Submitter the negotiator charged (group.user@uid_domain, or user@uid_domain)."),
        Field("action", KEYWORD, "", ID, TEXT, ""),
        Field("after", DOUBLE, "", NONE, DOC, ""),
        Field("applied", BOOLEAN, "", NONE, DOC, ""),
        Field("before", DOUBLE, "", NONE, DOC, ""),
        Field("dry_run", BOOLEAN, "", NONE, DOC, ""),
        Field("effective", DOUBLE, "", NONE, DOC, ""),
        Field("mode", KEYWORD, "", NONE, DOC, ""),
        Field("status", KEYWORD, "", NONE, DOC, ""),
        Field("target", DOUBLE, "", NONE, DOC, ""),
        Field("wanted", DOUBLE, "", NONE, DOC, ""),
        *ENVELOPE,
    ),
)

# fmt: on
