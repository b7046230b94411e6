"""Daily summaries computed in the store (:mod:`collector.summaries.run`) and what they sum
(:mod:`collector.summaries.spec`)."""

from collector.summaries.run import Summarized, summarize
from collector.summaries.spec import COLUMNS, SOURCES

__all__ = ["COLUMNS", "SOURCES", "Summarized", "summarize"]
