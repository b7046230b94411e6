"""``[log]``: what the services (``probe run``, ``collector serve``) log, and how."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from probes.config.fields import Section

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "LogSettings"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


class LogSettings(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="The least severe events the services log: DEBUG, INFO, WARNING or ERROR."
    )
    format: Literal["text", "json"] = Field(
        "text",
        description="text: one line per event (time, logger, level, message); json: one JSON object per line "
        "(time, logger, level, message, exception), for log shippers.",
    )
    file: str = Field(
        "",
        description="The file the services log to, appended (reopened when a log rotation moves it). Empty: "
        "stderr (journald takes it). Under condor_master: FAIRACCT_LOG, $(LOG)/FairacctLog by default.",
    )
