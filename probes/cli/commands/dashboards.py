"""``fairacct dashboards install --url URL``: the Kibana / OpenSearch Dashboards saved objects,
imported through the saved-objects API."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_text
from probes.cli.options import add_actions, add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Kibana / OpenSearch Dashboards saved objects"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    install = add_options(
        add_actions(parser)("install", help="import the dashboards through the saved-objects API"), "--store"
    )
    install.add_argument("--url", required=True, help="Kibana or OpenSearch Dashboards, http(s)://HOST:PORT")
    install.add_argument("--flavour", choices=("kibana", "opensearch"), default="kibana")


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from collector.dashboards import install_dashboards  # urllib and TLS: only for this command
    from collector.sinks.elasticsearch.auth import read_auth

    s = config.store
    auth = read_auth(
        https=args.url.startswith("https"), api_key_file=s.api_key_file or None, api_key_env=s.api_key_env or None,
        username=s.username or None, password_file=s.password_file or None, password_env=s.password_env or None,
        ca_certs_file=s.ca_file or None, ca_certs_env=None,
    )  # fmt: skip
    imported = install_dashboards(args.url, flavour=args.flavour, auth=auth)
    text = f"imported {imported.count} saved objects into {args.flavour} {args.url}"
    print_text(
        args,
        {"imported": imported.count, "errors": imported.errors},
        text + "".join(f"\n  {k}: {v}" for k, v in imported.errors.items()),
    )
    return EXIT_OK
