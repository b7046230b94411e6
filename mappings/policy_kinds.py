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
        Field("policy", KEYWORD, "", ID, DOC, "The fairshare policy's name."),
        Field("type", KEYWORD, "", ID, TEXT, "Credential type (user, group, project, ...)."),
        Field("name", KEYWORD, "", ID, TEXT, "Name (of the slot, node or credential)."),
        Field("window_start", TIME, "UNIX s", ID | DATES, DOC, "Start of the fairshare window."),
        Field("decay", DOUBLE, "", NONE, DOC, "The decay factor applied per window."),
        Field("decayed", DOUBLE, "", NONE, DOC, "Usage with the earlier windows' decayed."),
        Field("depth", LONG, "", NONE, DOC, "Depth in the credential tree."),
        Field("effective", DOUBLE, "", NONE, DOC, "Its effective share."),
        Field("interval_s", LONG, "s", NONE, DOC, "Seconds the snapshot stands for."),
        Field("metric", KEYWORD, "", NONE, DOC, "What usage measures (e.g. billed, penalty)."),
        Field("off_target", BOOLEAN, "", NONE, DOC, "The share is off its target."),
        Field("over_cap", BOOLEAN, "", NONE, DOC, "The usage is over the credential's cap."),
        Field("priority", DOUBLE, "", NONE, DOC, "The priority the policy gives it."),
        Field("target", DOUBLE, "", NONE, DOC, "The credential's target share."),
        Field("target_mode", KEYWORD, "", NONE, DOC, "How targets are set."),
        Field("total", DOUBLE, "", NONE, DOC, "Usage of every credential in the window."),
        Field("usage", DOUBLE, "", NONE, DOC, "Usage in the window (the policy's metric)."),
        Field("weight", DOUBLE, "", NONE, DOC, "The credential's weight."),
        Field("window", LONG, "", NONE, DOC, "Length of the window."),
        Field("window_end", TIME, "UNIX s", NONE, DOC, "End of the window."),
        *ENVELOPE,
    ),
)


FAIRNESS = Kind(
    "fairness",
    3,
    "fairacct fairness records (Sedighi et al. 2014, \"Fairness of task scheduling in high performance computing environments\"), one document per credential and time bucket: idle demand and allocation in cores, the part served, the equal share, starvation, and the bucket's Jain indices; monthly indices fairacct-fairness-YYYY.MM by the record's own timestamp",
    (
        Field("pool", KEYWORD, "", ID, DOC, "HTCondor pool the probe watched."),
        Field("type", KEYWORD, "", ID, TEXT, "Credential type."),
        Field("name", KEYWORD, "", ID, TEXT, "Name (of the slot, node or credential)."),
        Field("bucket_start", TIME, "UNIX s", ID | DATES, DOC, "Start of the time bucket."),
        Field("allocation_cpus", DOUBLE, "cores", NONE, DOC, "Cores its jobs held."),
        Field("bucket_end", TIME, "UNIX s", NONE, DOC, "End of the time bucket."),
        Field("demand_cpus", DOUBLE, "cores", NONE, DOC, "Cores the credential's idle jobs asked for."),
        Field("group", KEYWORD, "", NONE, DOC, "Accounting group of the job."),
        Field("jain_allocation", DOUBLE, "", NONE, DOC, "The bucket's Jain index of allocations."),
        Field("jain_served", DOUBLE, "", NONE, DOC, "The bucket's Jain index of the part served."),
        Field("served", DOUBLE, "", NONE, DOC, "The part of its demand served."),
        Field("share_cpus", DOUBLE, "cores", NONE, DOC, "Its equal share of the cores."),
        Field("snapshots", LONG, "", NONE, DOC, "Snapshots in the bucket."),
        Field("starved", BOOLEAN, "", NONE, DOC, "It had demand and less than its share."),
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
        Field("credential", KEYWORD, "", ID, DOC, "The credential whose priority was synced."),
        Field("sync_at", TIME, "UNIX s", ID | DATES, DOC, "When the sync (or restore) ran."),
        Field("submitter", KEYWORD, "", NONE, TEXT, "Submitter the negotiator charged (group.user@uid_domain, or user@uid_domain)."),
        Field("action", KEYWORD, "", ID, TEXT, "What was done (set, restore, ...)."),
        Field("after", DOUBLE, "", NONE, DOC, "The value after."),
        Field("applied", BOOLEAN, "", NONE, DOC, "The value was set."),
        Field("before", DOUBLE, "", NONE, DOC, "The negotiator's value before."),
        Field("dry_run", BOOLEAN, "", NONE, DOC, "Nothing was set (a dry run)."),
        Field("effective", DOUBLE, "", NONE, DOC, "The effective share."),
        Field("mode", KEYWORD, "", NONE, DOC, "Priority factor or accumulated usage."),
        Field("status", KEYWORD, "", NONE, DOC, "The result of the sync."),
        Field("target", DOUBLE, "", NONE, DOC, "The target share."),
        Field("wanted", DOUBLE, "", NONE, DOC, "What the fairshare asked for."),
        *ENVELOPE,
    ),
)

# fmt: on
