"""APEL messages from the store: what WLCG's accounting repository (APEL) reads, made from
fairacct's job records or from Gratia records, grouped by the store, and delivered as APEL's
own client delivers them (a directory queue ssmsend sends from).

- :mod:`collector.apel.messages`: APEL's message kinds as data (header, field order,
  mandatory and integer fields) and their text;
- :mod:`collector.apel.identity`: VO, VO group and role of an FQAN;
- :mod:`collector.apel.keys`: APEL's keys as its server compares them (whitespace, collation,
  column lengths);
- :mod:`collector.apel.grouping`: the store's sums per site, month and APEL's keys, and the
  APEL records made of them (normalised by each host's benchmark per core);
- :mod:`collector.apel.jobs`: individual job records, and what APEL's summariser makes of them;
- :mod:`collector.apel.outgoing`: the directory queue, a month re-sent replacing the month.
"""

from collector.apel.grouping import ApelMonth, ApelOptions, ApelResult, apel_months, months_between
from collector.apel.jobs import job_records, job_summaries
from collector.apel.messages import KINDS, MessageKind, render
from collector.apel.outgoing import Delivered, deliver

__all__ = [
    "KINDS",
    "ApelMonth",
    "ApelOptions",
    "ApelResult",
    "Delivered",
    "MessageKind",
    "apel_months",
    "deliver",
    "job_records",
    "job_summaries",
    "months_between",
    "render",
]
