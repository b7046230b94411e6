"""The collector as the tests meet it: ``fairacct collector serve`` in a process of its own, on
127.0.0.1 and a free port, with its own token directory and state; a real client (httpx).

:func:`start_collector` writes the configuration, starts the process and waits until
/healthz answers; :meth:`Collector.stop` ends it (SIGTERM, or SIGKILL for the crash tests).
"""

from __future__ import annotations

import os
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

FAIRACCT = str(Path(sys.executable).parent / "fairacct")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def record(i: int | str, probe: str, kind: str = "job", **extra: Any) -> dict[str, Any]:
    """A fairacct record as collector.records.table_docs makes them (the fields the collector reads)."""
    return {
        "id": f"{probe}-{kind}-{i}", "kind": kind, "schema_version": 1, "probe": probe,
        "timestamp": "2026-11-21T14:00:00Z", "end": 1795269600, "user": "alice", "cpus": 1.0, **extra,
    }  # fmt: skip


class PortTaken(AssertionError):
    """The collector could not listen: another process holds its port."""


@dataclass
class Collector:
    """A collector process and what the tests need to talk to it."""

    root: Path
    port: int
    tokens: dict[str, str]
    settings: dict[str, Any] = field(default_factory=dict)
    store: str = "sqlite:///store.sqlite"
    process: subprocess.Popen[bytes] | None = None
    max_file_bytes: int | None = None  # RLIMIT_FSIZE of the process: its disk is "full" at this file size
    env: dict[str, str] = field(default_factory=dict)  # added to the process's environment (FAIRACCT_CRASH_AT)
    command: str = FAIRACCT  # the fairacct that serves (another release's, for the upgrade tests)
    answered: bool = False  # it was started once: its port is the tests'
    store_settings: dict[str, Any] = field(default_factory=dict)  # [collector.store] besides its url

    @property
    def url(self) -> str:
        scheme = "https" if self.settings.get("tls_cert_file") else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """The certificate to trust for https (the collector's own, self-signed)."""
        cert = self.settings.get("tls_cert_file")
        return ssl.create_default_context(cafile=cert) if cert else True

    @property
    def config(self) -> Path:
        return self.root / "collector.toml"

    @property
    def log(self) -> str:
        path = self.root / "collector.log"
        return path.read_text() if path.exists() else ""

    def auth(self, probe: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[probe]}"}

    def start(self, timeout_s: float = 30.0) -> Collector:
        """The process started and answering on ``port``; on another free port when a first start
        finds that port taken (free when :func:`free_port` asked, another test's since)."""
        tries = 1 if self.answered else 3  # a restart keeps its port: the test's probes know it
        for tried in range(1, tries + 1):
            try:
                self._launch(timeout_s)
                break
            except PortTaken:
                if tried == tries:
                    raise
                self.port = free_port()
        self.answered = True
        return self

    def _launch(self, timeout_s: float) -> None:
        (self.root / "tokens").mkdir(parents=True, exist_ok=True)
        for probe, token in self.tokens.items():
            (self.root / "tokens" / probe).write_text(token + "\n")
            os.chmod(self.root / "tokens" / probe, 0o600)
        lines = [f"[collector]\nport = {self.port}"]
        lines += [f"{k} = {_toml(v)}" for k, v in self.settings.items()]
        lines += [f'[collector.store]\nurl = "{self.store}"']
        lines += [f"{k} = {_toml(v)}" for k, v in self.store_settings.items()]
        self.config.write_text("\n".join(lines) + "\n")
        said_before = len(self.log)
        with open(self.root / "collector.log", "ab") as log:
            self.process = subprocess.Popen(
                [self.command, "collector", "serve", "--config", str(self.config)], stderr=log, stdout=log,
                env={**os.environ, **self.env},
                preexec_fn=None if self.max_file_bytes is None else _file_size_limit(self.max_file_bytes),
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            said = self.log[said_before:]
            if self.process.poll() is not None:
                taken = f"cannot listen on 127.0.0.1:{self.port} (Address already in use)" in said
                raise (PortTaken if taken else AssertionError)(
                    f"the collector exited with {self.process.returncode}:\n{said}"
                )
            # Only once this process says it holds the port is an answer its, not another test's
            # collector's that took the port meanwhile (this one then exits).
            holds = re.search(rf"collector listening on \S+:{self.port}\n", said)
            try:
                if holds and httpx.get(f"{self.url}/openapi.json", timeout=1, verify=self.verify).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the collector did not answer within {timeout_s} s:\n{self.log}")
            time.sleep(0.05)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        self.process = None
        return code


def _file_size_limit(size: int) -> Any:
    """What the child runs before it starts: no file of its may grow past ``size`` bytes (a
    write beyond fails with EFBIG, as on a full disk; SIGXFSZ ignored, so it is an error and
    not the end of the process)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.fixture(scope="module")
def shared_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """One collector for the tests of a module that need nothing of their own (256 KiB bodies)."""
    collector = Collector(tmp_path_factory.mktemp("shared"), free_port(), {"p1": "token-one", "p2": "token-two"},
                          {"flush_every_s": 0.2, "max_body_size": "256 KiB"})  # fmt: skip
    yield collector.start()
    collector.stop()


@pytest.fixture
def start_collector(tmp_path: Path) -> Iterator[Any]:
    """start_collector(name, tokens=..., store=..., store_settings=..., env=..., **settings) -> a started
    Collector; all are stopped at the end."""
    started: list[Collector] = []

    def start(name: str = "c1", *, tokens: dict[str, str] | None = None, store: str = "sqlite:///store.sqlite",
              port: int | None = None, max_file_bytes: int | None = None, command: str = FAIRACCT,
              env: dict[str, str] | None = None, store_settings: dict[str, Any] | None = None,
              **settings: Any) -> Collector:  # fmt: skip
        collector = Collector(tmp_path / name, port or free_port(), tokens or {"p1": "token-one", "p2": "token-two"},
                              {"flush_every_s": 0.2, **settings}, store, max_file_bytes=max_file_bytes,
                              command=command, env=env or {}, store_settings=store_settings or {})  # fmt: skip
        started.append(collector)
        return collector.start()

    yield start
    for collector in started:
        if collector.process is not None:
            collector.stop()


def self_signed(where: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made in ``where`` with the openssl command (the
    test skips, saying so, without it)."""
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a self-signed certificate")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
