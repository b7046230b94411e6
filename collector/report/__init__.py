"""The static HTML report: its tables, summed in the store (:mod:`collector.report.tables`),
its plots (:mod:`collector.report.svg`) and the page (:mod:`collector.report.page`)."""

from collector.report.page import Figure, render_page, write_report
from collector.report.tables import ReportTables, report_tables

__all__ = ["Figure", "ReportTables", "render_page", "report_tables", "write_report"]
