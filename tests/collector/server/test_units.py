"""The collector service's parts in-process: the error mapping, a text endpoint plugged in as
Gratia's will be, tokens, gzip limits, settings, and the dependency direction."""

from __future__ import annotations

import ast
import asyncio
import gzip
import importlib
import inspect
import platform
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from collector import errors
from collector.errors import (
    BadRequestError,
    ConfigError,
    OverloadedError,
    StoreError,
    TooLargeError,
    UnauthorizedError,
)
from collector.outbox import Outbox, Parcel
from collector.server import CollectorSettings, Endpoint, Ingest, Style, create_app
from collector.server.backlog import Backlog
from collector.server.body import gunzip
from collector.server.committer import GroupCommitter
from collector.server.replies import _REPLIES
from collector.server.sources import SourceBudgets, source_of
from collector.server.tokens import TokenRing
from collector.server.v1_records import RECORDS
from collector.sinks.sqlite import EmbeddedStore

from ...conftest import ROOT


def test_the_collector_never_imports_probes() -> None:
    for path in (ROOT / "collector").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n == "probes" or n.startswith("probes.")], f"{path} imports {names}"


def test_every_ingest_error_has_its_reply() -> None:
    ingest = {c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, errors.IngestError)}
    mapped = {kind for kind, _, _ in _REPLIES}
    assert ingest - {errors.IngestError} <= mapped and StoreError in mapped
    assert len({reason for _, _, reason in _REPLIES}) == len(_REPLIES)


async def gratia_like(request: Request, ingest: Ingest) -> Response:
    """An endpoint like Gratia's: GRACC's text replies, the same body limits and durable path."""
    body = (await ingest.body(request)).data.decode()
    if body == "bad":
        raise BadRequestError('missing key "arg1"')
    if body == "boom":
        raise RuntimeError("a bug")
    await ingest.make_durable(
        "gratia", "sender", [Parcel.encoded("job", [{"id": body, "timestamp": "2026-11-21T14:00:00Z"}])]
    )
    return PlainTextResponse("OK")


def test_a_text_endpoint_plugs_into_the_same_mapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tokens").mkdir()
    settings = CollectorSettings.of(token_dir=tmp_path / "tokens", state_dir=tmp_path / "state", max_body_size=100)
    store = tmp_path / "store.sqlite"
    app = create_app(settings, lambda: EmbeddedStore(store),
                     endpoints=(RECORDS,
                                Endpoint("/gratia-servlets/rmi", "gratia", Style.TEXT, gratia_like)))  # fmt: skip

    def full(self: Outbox, parcels: Any) -> int:
        raise StoreError(f"{self.path}: cannot commit records to the outbox (database or disk is full)")

    async def exercise() -> None:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://collector") as client,
        ):
            url = "/gratia-servlets/rmi"
            reply = await client.post(url, content=b"r1")
            assert (reply.status_code, reply.text) == (200, "OK")
            reply = await client.post(url, content=b"bad")
            assert (reply.status_code, reply.text) == (400, 'Error handling request: missing key "arg1"')
            reply = await client.post(url, content=b"x" * 101)
            assert (reply.status_code, reply.text) == (413, "Error: java.lang.IllegalStateException: Post too large")
            reply = await client.post(url, content=b"boom")
            assert (reply.status_code, reply.text) == (500, "Internal server error")
            monkeypatch.setattr(Outbox, "commit_parcels", full)
            reply = await client.post(url, content=b"r2")
            assert (reply.status_code, reply.text) == (503, "Service unavailable right now")
            assert reply.headers["Retry-After"] == "10"
            stats = (await client.get("/stats")).json()
            assert stats == {"Records": 1, "RecordErrors": 0, "Requests": 5, "RequestErrors": 4}

    asyncio.run(exercise())


def test_tokens_are_compared_whole_and_never_shown(tmp_path: Path) -> None:
    (tmp_path / "fairacct@ce01").write_text("s3cret\n")
    (tmp_path / ".hidden").write_text("other")
    ring = TokenRing(tmp_path)
    assert ring.probes == ("fairacct@ce01",) and "s3cret" not in repr(ring)
    assert ring.probe_for("Bearer s3cret") == ring.probe_for("bearer  s3cret ") == "fairacct@ce01"
    for header in (None, "", "Bearer", "Bearer s3cre", "Bearer s3cret2", "Token s3cret"):
        with pytest.raises(UnauthorizedError):
            ring.probe_for(header)
    with pytest.raises(ConfigError, match=r"collector token_dir: .*/none: no such directory"):
        TokenRing(tmp_path / "none")


def test_gzip_is_inflated_no_further_than_the_limit() -> None:
    bomb = gzip.compress(b"\0" * 50_000_000)
    with pytest.raises(TooLargeError, match="decompresses to over the limit of 1000 bytes"):
        gunzip(bomb, 1000)
    assert gunzip(gzip.compress(b"[1]") + gzip.compress(b""), 1000) == (b"[1]", 2)
    assert gunzip(gzip.compress(b"[]"), 2) == (b"[]", 1)


def test_gzip_is_inflated_a_slice_at_a_time_each_taken_before_it_is_kept() -> None:
    taken: list[int] = []
    data = b"x" * (3 * 2**20 + 5)
    assert gunzip(gzip.compress(data, mtime=0), 2**22, taken.append) == (data, 1)
    assert sum(taken) == len(data) and max(taken) <= 2**20  # a slice of at most 1 MiB at a time
    many = b"".join(gzip.compress(b"%d," % i, mtime=0) for i in range(20_000))  # each member read once
    assert gunzip(many, 2**20) == (b"".join(b"%d," % i for i in range(20_000)), 20_000)
    assert gunzip(gzip.compress(b"[1]") + b"\0" * 1000, 100) == (b"[1]", 0)  # padding: not kept as sent
    with pytest.raises(BadRequestError, match="truncated"):
        gunzip(gzip.compress(b"[1]")[:-3], 100)

    def refuse(size: int) -> None:
        raise OverloadedError("no room")

    with pytest.raises(OverloadedError, match="no room"):
        gunzip(gzip.compress(data), 2**22, refuse)


def test_requests_without_a_token_hold_bytes_within_their_sources_budget_and_all() -> None:
    budgets = SourceBudgets(per_source=100, total=150)
    first, second = budgets.lease("192.0.2.7"), budgets.lease("192.0.2.7")
    first.take(60)
    with pytest.raises(OverloadedError, match=re.escape("from 192.0.2.7 hold 60 bytes")):
        second.take(41)
    second.take(40)
    elsewhere = budgets.lease("2001:db8::1")
    with pytest.raises(OverloadedError):  # 151 bytes in all
        elsewhere.take(51)
    elsewhere.take(50)
    with pytest.raises(TooLargeError, match="the most a request without a token may hold"):
        budgets.lease("198.51.100.1").take(101)  # alone over its source's budget: no retry would help
    first.close()
    second.close()
    assert (budgets.held, budgets.in_all) == ({"2001:db8::/64": 50}, 50)
    elsewhere.close()
    assert (budgets.held, budgets.in_all) == ({}, 0)
    assert source_of("2001:db8::1") == source_of("2001:db8::ffff:7") == "2001:db8::/64"  # one host's /64
    assert (source_of("::ffff:192.0.2.7"), source_of(None)) == ("192.0.2.7", "-")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"port": 70000}, "collector port: expected at most 65535, got 70000"),
        ({"flush_every_s": 0}, "collector flush_every_s: expected more than 0, got 0"),
        ({"max_body_size": 0}, "collector max_body_size: expected more than 0, got 0"),
        ({"tls_cert_file": "c.pem"}, "collector: give both tls_cert_file and tls_key_file, or neither"),
        ({"port": "80"}, "collector port: input should be a valid integer, got '80'"),
        (
            {"port": -1, "bogus": 1},
            "collector port: expected at least 0, got -1; collector bogus: extra inputs are not permitted, got 1",
        ),
        (
            {"store": {"url": "collector+https://c.example.org"}},
            "collector store.url: the collector needs a store of its own, got another collector: "
            "'collector+https://c.example.org'",
        ),
        ({"max_group_records": 5}, "collector max_group_records: extra inputs are not permitted, got 5"),
        (
            {"gratia_senders": ["condor:ce01"]},  # the old form: which networks, it cannot say
            "collector gratia_senders.0: a Gratia sender is named with the networks it sends from: write "
            '{probe = "condor:ce01", networks = ["192.0.2.0/24"]}',
        ),
        (
            {"gratia_senders": [{"probe": "condor:ce01", "networks": ["192.0.2.0/24"]}]},  # listed before sites
            "collector gratia_senders.0: sites is missing: a Gratia sender reports only for the sites listed for it "
            '(its records\' SiteName); write {probe = "condor:ce01", networks = [...], sites = ["SiteA"]}',
        ),
        (
            {"gratia_senders": [{"probe": "condor:ce01", "networks": ["192.0.2.0/24"], "sites": []}]},
            "collector gratia_senders.0.sites: a Gratia sender reports for at least one site (GratiaCore writes its "
            "SiteName into every record), got none: list the sites it reports for, or remove the sender",
        ),
        (
            {"gratia_senders": [{"probe": "condor:ce01", "networks": ["192.0.2.1/24"], "sites": ["SiteA"]}]},
            'collector gratia_senders.0.networks.0: expected an address or a network (CIDR, e.g. "192.0.2.0/24"), '
            "got '192.0.2.1/24': 192.0.2.1/24 has host bits set",
        ),
    ],
)
def test_settings_name_the_key(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        CollectorSettings.of(token_dir=tmp_path, state_dir=tmp_path, **change)


def test_the_server_runs_with_what_the_configuration_validates() -> None:
    """The collector's settings are one model (issue 38): the [collector] section, its store
    [collector.store] and the bounds no operator sets are CollectorSettings, sizes read as "1 KiB",
    and the service runs with it as the file gave it."""
    from probes.config import parse_config

    section = {
        "listen_address": "0.0.0.0", "port": 0, "tls_cert_file": "c.pem", "tls_key_file": "k.pem",
        "token_dir": "/t", "max_body_size": "1 KiB", "max_outbox_depth": 9,
        "gratia_senders": [{"probe": "condor:ce01", "networks": ["192.0.2.0/24", "2001:db8::7", "::ffff:10.0.0.0/104"],
                            "sites": ["SiteA"]}],
        "state_dir": "/s", "flush_every_s": 0.5, "flush_batch_size": 3, "flush_batch_bytes": "4 KiB",
        "store_stale_s": 7.0, "summaries_lease_s": 30.0,
        "summaries_recent_days": 2, "summaries_every_s": 60.0, "summaries_nightly_days": 0,
        "max_records_body_size": "2 KiB", "max_records_per_request": 10, "max_requests_per_probe": 2,
        "max_connections": 50, "idle_timeout_s": 1.5, "header_timeout_s": 2.5, "body_timeout_s": 3.5,
        "backpressure_depth": 5, "outbox_keep_free_mib": 1.0, "outbox_reserve_mib": 2.0, "max_fields_per_record": 64,
        "probes": [{"probe": "p1", "sites": ["SiteA"], "pools": ["cm.site-a"]}],
        "max_anonymous_connections": 7, "anonymous_memory_per_source": "3 KiB", "anonymous_memory": "9 KiB",
        "max_connections_per_probe": 3, "handshake_timeout_s": 4.5,
        "store": {"url": "https://es.example.org:9200", "username": "u", "install_templates": True},
        "trusted_proxies": ["127.0.0.1", "10.1.0.0/16", "::ffff:127.0.0.2"],
    }  # fmt: skip
    config = parse_config({"collector": section})
    assert set(section) == set(CollectorSettings.model_fields)
    settings = config.collector_settings()
    assert settings == config.collector != CollectorSettings()
    assert settings.max_body_size == 1024 == settings.max_body_bytes and settings.scheme == "https"
    assert settings.max_records_body_size == 2048 and settings.max_records_body_bytes == 1024  # the smaller
    store = settings.store
    assert (store.index_prefix, store.username, store.install_templates) == ("fairacct", "u", True)
    assert (settings.max_group_records, settings.max_header_bytes) == (50_000, 64 * 1024)
    assert settings.flush_bytes == 4096
    (sender,) = settings.gratia_senders
    # an IPv4-mapped network is the IPv4 network it is: an IPv4 client is compared in IPv4 form
    assert [str(n) for n in sender.networks] == ["192.0.2.0/24", "2001:db8::7/128", "10.0.0.0/8"]
    assert sender.sites == ["SiteA"]
    assert (settings.anonymous_memory_per_source, settings.anonymous_memory) == (3072, 9216)
    assert [str(n) for n in settings.trusted_proxies] == ["127.0.0.1/32", "10.1.0.0/16", "127.0.0.2/32"]


def test_the_flushers_writes_run_in_the_outbox_writer_thread(tmp_path: Path) -> None:
    """The outbox has one writer: what the flusher writes runs in the committer's thread, in
    order with the requests' commits; its errors come back to the caller; once the writer has
    stopped, a write is refused instead of waiting for ever."""
    committer = GroupCommitter(tmp_path / "outbox.sqlite", max_depth=100)
    committer.start()
    try:
        first = [Parcel.encoded("job", [{"id": "r1", "timestamp": "2026-11-21T14:00:00Z"}])]
        asyncio.run(committer.commit(first, "p1"))

        def depth(outbox: Outbox) -> tuple[str, dict[str, int]]:
            return threading.current_thread().name, outbox.status().depth

        assert committer.write(depth) == ("fairacct: outbox writer", {"job": 1})

        def fail(outbox: Outbox) -> None:
            raise StoreError("disk I/O error")

        with pytest.raises(StoreError, match="disk I/O error"):
            committer.write(fail)
        assert committer.write(lambda outbox: outbox.status().depth) == {"job": 1}  # the writer goes on
    finally:
        committer.stop()
    with pytest.raises(StoreError, match="the outbox writer has stopped"):
        committer.write(depth)


def test_the_backlog_is_the_newest_records_admitted_counted_by_probe() -> None:
    """What each probe holds of the outbox's depth (backpressure's shares): its part of the newest
    ``depth`` records admitted, an upper bound by one segment at most, and nothing once sent."""
    backlog = Backlog(segment_records=100)
    for _ in range(10):
        backlog.add("busy", 100, depth=10_000)
    backlog.add("quiet", 10, depth=10_000)
    assert (backlog.held("busy"), backlog.held("quiet"), backlog.held("new")) == (1000, 10, 0)
    assert (backlog.holders("busy"), backlog.holders("new")) == (2, 3)
    backlog.trim(250)  # the outbox sent all but the newest 250: the segments that cover them are kept
    assert (backlog.held("busy"), backlog.held("quiet")) == (300, 10)
    backlog.trim(5)  # the last segment is kept whole (its probes hold at most that)
    assert (backlog.held("busy"), backlog.held("quiet"), backlog.holders("quiet")) == (0, 10, 1)


def test_the_collector_may_open_the_files_its_connections_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve() raises the soft limit on open files to max_connections and 100 more, as far as the
    hard limit lets it, and refuses to start beyond (at the limit, no probe could connect)."""
    serving = importlib.import_module("collector.server.serve")  # (the package's ``serve`` is the function)
    limits = {"now": (1024, 4096)}
    monkeypatch.setattr(serving.resource, "getrlimit", lambda _: limits["now"])
    monkeypatch.setattr(serving.resource, "setrlimit", lambda _, value: limits.update(now=value))
    serving._enough_files(500)
    assert limits["now"] == (1024, 4096)
    serving._enough_files(2000)
    assert limits["now"] == (2100, 4096)
    message = (
        r"collector max_connections: 5000 connections need 5100 open files, but this process may open at most "
        r"4096 .*; lower max_connections to at most 3996"
    )
    with pytest.raises(ConfigError, match=message):
        serving._enough_files(5000)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings are glibc malloc's")
def test_glibc_takes_the_collectors_malloc_settings() -> None:
    # serve() has glibc keep freed memory for the next request (benchmarks/README.md measures
    # why); in a process of its own, as they hold for the process's life
    code = "import importlib; print(importlib.import_module('collector.server.serve')._keep_freed_memory())"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True", done.stderr
