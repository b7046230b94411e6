"""``fairacct collector serve``: the collector service; the ``[collector]`` section and the
store are its settings."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from collector.errors import ConfigError
from probes.cli.common import EXIT_OK, log_lines
from probes.cli.options import add_actions, add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "the collector service"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(
        add_actions(parser)(
            "serve", help="take records from probes over HTTP ([collector] section) until SIGTERM or SIGINT"
        ),
        "--store",
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """collector serve: the [collector] section and the store are the server's settings."""
    from collector.server import ServerSettings, serve  # Starlette and uvicorn only for the service
    from collector.sinks import ensure_templates, open_sink
    from collector.statelock import hold_state_dir
    from probes.files import check_writable

    if config.store.url.startswith("collector+"):
        raise ConfigError(
            f"store.url: the collector needs a store of its own, got another collector: {config.store.url!r}"
        )
    settings = ServerSettings.serving(config.collector, config.store.url, config.store.auth())
    check_writable(settings.state_dir, "collector.state_dir")
    with hold_state_dir(settings.state_dir, "collector.state_dir"):  # before its outbox or store is opened
        sink = open_sink(settings.store_url, base=settings.state_dir, auth=settings.store_options)
        try:
            ensure_templates(sink, settings.store_url, install=config.store.install_templates)
        finally:
            sink.close()
        with log_lines():
            serve(settings)
    return EXIT_OK
