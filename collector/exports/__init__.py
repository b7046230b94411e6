"""Exports for allocation committees: the usage table (:mod:`collector.exports.table`) and its
files (:mod:`collector.exports.writers`)."""

from collector.exports.table import Period, usage_table
from collector.exports.writers import FORMATS, write_export

__all__ = ["FORMATS", "Period", "usage_table", "write_export"]
