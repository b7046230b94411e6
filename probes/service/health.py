"""The probe service's health and metrics, and the small HTTP server that shows them.

``GET /healthz``: JSON with the last success and failure of each job of the service and the
outbox depth; HTTP 200 while every job has succeeded within three of its periods (or has not
been due that long) and the outbox holds no dead letters, 503 otherwise, so that a monitor
needs no parsing to alert. ``status`` says which: ``failing`` (a job is stale) or
``degraded`` (the jobs run, but the store refused records for good: they wait in the dead
letters until the cause is fixed and ``fairacct outbox retry`` sends them again).

``GET /metrics``: Prometheus' text exposition format (version 0.0.4), written here by hand:

======================================================  ========  =====================================
metric                                                  type      labels
======================================================  ========  =====================================
``fairacct_cycles_total``                               counter   ``job``, ``outcome`` (ok, failed)
``fairacct_records_total``                              counter   ``kind`` (committed to the outbox)
``fairacct_records_sent_total``                         counter   ``kind`` (acknowledged by the store)
``fairacct_source_failures_total``                      counter   ``source`` (``collector``, ``schedd:NAME``,
                                                                  ``sink``, ...)
``fairacct_job_duration_seconds``                       summary   ``job`` (``_sum`` and ``_count``)
``fairacct_job_last_duration_seconds``                  gauge     ``job``
``fairacct_job_last_success_timestamp_seconds``         gauge     ``job``
``fairacct_outbox_depth``                               gauge     ``kind``
``fairacct_outbox_oldest_age_seconds``                  gauge
``fairacct_outbox_dead_letters``                        gauge     ``kind``
``fairacct_snapshot_interval_seconds``                  gauge     (what the last snapshot stands for)
``fairacct_unobserved_seconds_total``                   counter   (gaps between snapshots longer than
                                                                  ``pool.interval_s``, less what the
                                                                  next snapshot stands for)
``fairacct_unheard_nodes``                              gauge     (nodes of the last snapshot left
                                                                  unbilled, their ads stale)
``fairacct_unheard_since_timestamp_seconds``            gauge     (the oldest of their LastHeardFrom)
``fairacct_incomplete_nodes``                           gauge     (nodes of the last snapshot left
                                                                  unbilled: an ad quarantined, or
                                                                  more allocated than they have)
``fairacct_unbilled_claims_total``                      counter   ``reason`` (``stale``,
                                                                  ``previous_run``, ``job_on_another_slot``)
======================================================  ========  =====================================

The server is the standard library's, bound to 127.0.0.1 by default; it serves nothing else.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from collector.errors import ConfigError

__all__ = ["CONNECTION_TIMEOUT_S", "HealthServer", "JobState", "Metrics"]


@dataclass
class JobState:
    """What the service knows of one of its jobs."""

    every_s: float
    runs: int = 0
    failures: int = 0
    last_success: float | None = None
    last_failure: float | None = None
    last_error: str | None = None
    last_duration_s: float | None = None
    duration_sum_s: float = 0.0


@dataclass
class _Outbox:
    depth: dict[str, int] = field(default_factory=dict)
    oldest: float | None = None
    dead: dict[str, int] = field(default_factory=dict)


class Metrics:
    """Counters and gauges of the service, safe to update from its jobs' threads."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.started = clock()
        self.jobs: dict[str, JobState] = {}
        self.records: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.source_failures: Counter[str] = Counter()
        self.quarantined: Counter[str] = Counter()  # malformed ads skipped, by input (status, history, ...)
        self.outbox = _Outbox()
        self.snapshot_interval_s: float | None = None
        self.unobserved_s = 0.0
        self.unheard_nodes: int | None = None  # in the last snapshot (None: none read yet)
        self.unheard_since: float | None = None  # the oldest LastHeardFrom of those nodes
        self.incomplete_nodes: int | None = None  # in the last snapshot (None: none read yet)
        self.unbilled_claims: Counter[str] = Counter()  # dynamic slots left out, by reason

    def register(self, job: str, every_s: float) -> None:
        with self._lock:
            self.jobs.setdefault(job, JobState(every_s=every_s))

    def finished(self, job: str, *, ok: bool, duration_s: float, error: str | None = None) -> None:
        """Count one run of a job."""
        now = self._clock()
        with self._lock:
            state = self.jobs.setdefault(job, JobState(every_s=0.0))
            state.runs += 1
            state.last_duration_s = duration_s
            state.duration_sum_s += duration_s
            if ok:
                state.last_success = now
            else:
                state.failures += 1
                state.last_failure = now
                state.last_error = error

    def committed(self, counts: Mapping[str, int]) -> None:
        with self._lock:
            self.records.update({k: v for k, v in counts.items() if v})

    def flushed(self, counts: Mapping[str, int]) -> None:
        with self._lock:
            self.sent.update({k: v for k, v in counts.items() if v})

    def source_failed(self, source: str) -> None:
        with self._lock:
            self.source_failures[source] += 1

    def quarantined_ads(self, counts: Mapping[str, int]) -> None:
        """Count the malformed ads a read skipped (and quarantined), by input."""
        with self._lock:
            self.quarantined.update({k: v for k, v in counts.items() if v})

    def status_read(self, unheard_since: Sequence[float], unbilled: Mapping[str, int], incomplete: int = 0) -> None:
        """A snapshot's unheard nodes (the ``since`` of each), its dynamic slots left out,
        counted by reason (:mod:`probes.sources.unheard`), and its ``incomplete`` nodes
        (:func:`probes.sources.status.incomplete_nodes`)."""
        with self._lock:
            self.incomplete_nodes = incomplete
            self.unheard_nodes = len(unheard_since)
            self.unheard_since = min(unheard_since) if len(unheard_since) else None
            self.unbilled_claims.update({k: v for k, v in unbilled.items() if v})

    def set_outbox(self, depth: Mapping[str, int], oldest: float | None, dead: Mapping[str, int]) -> None:
        with self._lock:
            self.outbox = _Outbox(dict(depth), oldest, dict(dead))

    def set_snapshot_interval(self, seconds: float, unobserved_s: float = 0.0) -> None:
        with self._lock:
            self.snapshot_interval_s = seconds
            self.unobserved_s += unobserved_s

    # -- views --------------------------------------------------------------------------------

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, the /healthz document)."""
        now = self._clock()
        with self._lock:
            jobs = {}
            healthy = True
            for name, s in sorted(self.jobs.items()):
                since = s.last_success if s.last_success is not None else self.started
                stale = s.every_s > 0 and now - since > 3 * s.every_s
                healthy &= not stale
                jobs[name] = {
                    "every_s": s.every_s,
                    "runs": s.runs,
                    "failures": s.failures,
                    "last_success": _iso(s.last_success),
                    "last_failure": _iso(s.last_failure),
                    "last_error": s.last_error,
                    "last_duration_s": s.last_duration_s,
                    "stale": stale,
                }
            dead = sum(self.outbox.dead.values())
            status = "failing" if not healthy else "degraded" if dead else "ok"
            healthy &= not dead
            doc: dict[str, Any] = {
                "status": status,
                "started": _iso(self.started),
                "jobs": jobs,
                "outbox": {
                    "depth": sum(self.outbox.depth.values()),
                    "by_kind": dict(self.outbox.depth),
                    "oldest": _iso(self.outbox.oldest),
                    "dead_letters": dead,
                },
            }
            if dead:
                doc["problems"] = [
                    f"{dead} record(s) refused by the store for good "
                    f"({', '.join(f'{n} {k}' for k, n in sorted(self.outbox.dead.items()))}): "
                    "see `fairacct outbox --dead-letters`, fix the cause, then `fairacct outbox retry`"
                ]
        return healthy, doc

    def render(self) -> str:
        """The metrics in Prometheus' text format."""
        now = self._clock()
        out: list[str] = []

        def family(name: str, kind: str, help_: str, samples: list[tuple[str, dict[str, str], float]]) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")
            for suffix, labels, value in samples:
                text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
                out.append(f"{name}{suffix}{{{text}}} {_value(value)}" if text else f"{name}{suffix} {_value(value)}")

        with self._lock:
            jobs = sorted(self.jobs.items())
            family(
                "fairacct_cycles_total", "counter", "Runs of each job of the service, by outcome.",
                [("", {"job": n, "outcome": o}, v)
                 for n, s in jobs for o, v in (("ok", s.runs - s.failures), ("failed", s.failures))],
            )  # fmt: skip
            family("fairacct_records_total", "counter", "Records committed to the outbox, by kind.",
                   [("", {"kind": k}, v) for k, v in sorted(self.records.items())])  # fmt: skip
            family("fairacct_records_sent_total", "counter", "Records the store acknowledged, by kind.",
                   [("", {"kind": k}, v) for k, v in sorted(self.sent.items())])  # fmt: skip
            family("fairacct_source_failures_total", "counter",
                   "Failures of a source (collector, schedd, file) or of the store.",
                   [("", {"source": k}, v) for k, v in sorted(self.source_failures.items())])  # fmt: skip
            family("fairacct_quarantined_ads_total", "counter",
                   "Malformed ads skipped and kept in the quarantine, by input; the rest was read.",
                   [("", {"input": k}, v) for k, v in sorted(self.quarantined.items())])  # fmt: skip
            family(
                "fairacct_job_duration_seconds", "summary", "Duration of the runs of each job.",
                [s for n, st in jobs
                 for s in (("_sum", {"job": n}, st.duration_sum_s), ("_count", {"job": n}, float(st.runs)))],
            )  # fmt: skip
            family("fairacct_job_last_duration_seconds", "gauge", "Duration of the last run of each job.",
                   [("", {"job": n}, s.last_duration_s) for n, s in jobs if s.last_duration_s is not None])  # fmt: skip
            family("fairacct_job_last_success_timestamp_seconds", "gauge",
                   "UNIX time of the last successful run of each job.",
                   [("", {"job": n}, s.last_success) for n, s in jobs if s.last_success is not None])  # fmt: skip
            family("fairacct_outbox_depth", "gauge", "Records waiting in the outbox, by kind.",
                   [("", {"kind": k}, v) for k, v in sorted(self.outbox.depth.items())])  # fmt: skip
            oldest: list[tuple[str, dict[str, str], float]] = (
                [] if self.outbox.oldest is None else [("", {}, max(0.0, now - self.outbox.oldest))]
            )
            family(
                "fairacct_outbox_oldest_age_seconds", "gauge", "Age of the oldest record waiting in the outbox.", oldest
            )
            family("fairacct_outbox_dead_letters", "gauge", "Records the store refused for good, by kind.",
                   [("", {"kind": k}, v) for k, v in sorted(self.outbox.dead.items())])  # fmt: skip
            interval: list[tuple[str, dict[str, str], float]] = (
                [] if self.snapshot_interval_s is None else [("", {}, self.snapshot_interval_s)]
            )
            family(
                "fairacct_snapshot_interval_seconds", "gauge", "Seconds the last slot snapshot stands for.", interval
            )
            family("fairacct_unobserved_seconds_total", "counter", "Seconds of gaps no snapshot observed.",
                   [("", {}, self.unobserved_s)])  # fmt: skip
            nodes: list[tuple[str, dict[str, str], float]] = (
                [] if self.unheard_nodes is None else [("", {}, float(self.unheard_nodes))]
            )
            family("fairacct_unheard_nodes", "gauge",
                   "Nodes of the last snapshot whose ads are stale (not heard from within twice their update "
                   "interval), left unbilled.", nodes)  # fmt: skip
            family("fairacct_unheard_since_timestamp_seconds", "gauge",
                   "UNIX time the oldest unheard node of the last snapshot was last heard from.",
                   [] if self.unheard_since is None else [("", {}, self.unheard_since)])  # fmt: skip
            family("fairacct_incomplete_nodes", "gauge",
                   "Nodes of the last snapshot left unbilled as incomplete: an ad of theirs quarantined, or their "
                   "dynamic slots holding more than their size.",
                   [] if self.incomplete_nodes is None else [("", {}, float(self.incomplete_nodes))])  # fmt: skip
            family("fairacct_unbilled_claims_total", "counter",
                   "Dynamic slots left unbilled: stale, of a startd's previous run, or a job billed on another slot.",
                   [("", {"reason": k}, v) for k, v in sorted(self.unbilled_claims.items())])  # fmt: skip
        return "\n".join(out) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float | None) -> str:
    if value is None:
        return "NaN"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class HealthServer:
    """``/healthz`` and ``/metrics`` over HTTP, in a thread of its own."""

    def __init__(self, metrics: Metrics, address: str, port: int) -> None:
        self.metrics = metrics
        handler = _handler(metrics)
        try:
            self._server = ThreadingHTTPServer((address, port), handler)
        except OSError as exc:
            raise ConfigError(
                f"probe.health_port: cannot listen on {address}:{port} ({exc.strerror}); "
                "choose another port, or 0 to turn it off"
            ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fairacct: health", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


#: Seconds a connection to the health server may stay silent before it is closed: idle
#: connections would otherwise each hold a thread and a descriptor for ever (300 of them left
#: the outbox unable to open its database).
CONNECTION_TIMEOUT_S = 10.0


def _handler(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "fairacct"
        timeout = CONNECTION_TIMEOUT_S  # socketserver sets it on each connection's socket

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                healthy, doc = metrics.health()
                self._send(200 if healthy else 503, "application/json", json.dumps(doc, indent=1) + "\n")
            elif path == "/metrics":
                self._send(200, "text/plain; version=0.0.4; charset=utf-8", metrics.render())
            else:
                self._send(404, "text/plain; charset=utf-8", "not found: try /healthz or /metrics\n")

        def _send(self, status: int, content_type: str, body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds would drown the service's own log

    return Handler
