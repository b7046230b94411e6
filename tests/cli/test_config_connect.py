"""`fairacct config check --connect` (issue 39, point 2): the pool's collectors, the store and a
collector's store tried, one line each, exit 1 naming what failed; without ``--connect`` the
check stays offline. Against real parts: nothing listening on a free port, osmem-server, a
collector process, a loopback peer answering as Elasticsearch with security on, a real pool."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from osmem_server import OsmemServer

from collector.sinks.elasticsearch import ElasticsearchSink
from probes.cli import main
from tests.htcondor_pool import HTCondorPool, free_port

from ..collector.conftest import osmem_server  # noqa: F401 - the fixture, its pipe closed at the end
from ..collector.server.conftest import Collector
from ..conftest import DEMO

EXIT_FAILED = 1
DEMO_STATUS = DEMO / "status.ads"


def check(capsys: pytest.CaptureFixture[str], config: Path, *argv: str) -> tuple[int, list[str], str]:
    code = main(["config", "check", "--config", str(config), "--connect", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "probe.toml"
    path.write_text(f'[probe]\nstate_dir = "{tmp_path / "state"}"\n' + text)
    return path


def test_nothing_listening_is_named_for_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The pool's collector and the store at ports where nothing listens: each its own line,
    each FAILED with its reason; exit 1. Without --connect the same file passes, offline."""
    pool, store = free_port(), free_port()
    config = write_config(
        tmp_path,
        f'[pool]\ncollectors = ["127.0.0.1:{pool}"]\n[sources]\nlive = true\n[store]\nurl = "http://127.0.0.1:{store}"\n',
    )
    code, lines, err = check(capsys, config, "--timeout", "20")
    assert code == EXIT_FAILED, (lines, err)
    assert lines == [
        f"pool collector 127.0.0.1:{pool}: FAILED: collector 127.0.0.1:{pool}: locate schedds: "
        "Failed communication with collector.",
        f"store http://127.0.0.1:{store}: FAILED: elasticsearch http://127.0.0.1:{store}: asking the cluster who it "
        "is failed: Connection error",
    ], lines
    assert main(["config", "check", "--config", str(config), "--json"]) == 0  # offline: nothing tried
    assert json.loads(capsys.readouterr().out)["store"]["url"] == f"http://127.0.0.1:{store}"
    assert main(["config", "check", "--config", str(config), "--timeout", "5"]) == 2
    assert "--timeout is for --connect" in capsys.readouterr().err
    code, _, err = check(capsys, config, "--timeout", "0")
    assert code == 2 and "--timeout: expected a number of seconds > 0, got 0" in err


def test_the_embedded_store_is_writable_or_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    code, lines, err = check(capsys, config)
    assert code == 0, err
    assert lines == [
        f"store sqlite:///{tmp_path}/state/fairacct.sqlite: ok: not made yet; {tmp_path} is writable "
        "(the first write makes it)"
    ]
    assert not (tmp_path / "state").exists()  # nothing made

    assert main(["probe", "once", "--config", str(config), "--status-file", str(DEMO_STATUS)]) == 0
    capsys.readouterr()
    code, lines, err = check(capsys, config, "--json")
    assert code == 0, err
    store = f"{tmp_path}/state/fairacct.sqlite"
    assert json.loads("\n".join(lines)) == {
        "connect": [{"name": f"store sqlite:///{store}", "ok": True, "said": f"{store} writable"}]
    }


def test_an_elasticsearch_store_is_reached_and_its_templates_checked(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    osmem_server: OsmemServer,  # noqa: F811 - the fixture
) -> None:
    clone = osmem_server.clone()
    try:
        config = write_config(tmp_path, f'[store]\nurl = "{clone.url}"\n')
        code, lines, err = check(capsys, config)
        assert code == EXIT_FAILED, err
        assert lines[0].startswith(f"store {clone.url}: FAILED: cluster osmem (opensearch ")
        assert "index templates missing or outdated (" in lines[0] and "run `fairacct mappings install`" in lines[0]
        with ElasticsearchSink(clone.url) as sink:
            sink.install_templates()
        code, lines, err = check(capsys, config)
        assert code == 0, err
        assert len(lines) == 1 and lines[0].startswith(f"store {clone.url}: ok: cluster osmem (opensearch ")
    finally:
        clone.close()


_UNAUTHENTICATED = (
    b'{"error":{"type":"security_exception","reason":"missing authentication credentials for REST request [/]"},'
    b'"status":401}'
)
_UNAUTHORIZED = (
    b'{"error":{"type":"security_exception","reason":"action [cluster:monitor/main] is unauthorized for user '
    b'[writer]"},"status":403}'
)


class _Secured(http.server.BaseHTTPRequestHandler):
    """What Elasticsearch with security on answers a request without credentials (401), or with
    those of a user without the privilege asked for (403): ``status`` says which."""

    status = 401

    def do_GET(self) -> None:
        answer = _UNAUTHENTICATED if self.status == 401 else _UNAUTHORIZED
        self.send_response(self.status)
        self.send_header("WWW-Authenticate", 'Basic realm="security"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def secured() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Secured)
    yield from _serve(server)


@pytest.fixture
def unprivileged() -> Iterator[str]:
    handler = type("_Unprivileged", (_Secured,), {"status": 403})
    yield from _serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler))


def _serve(server: http.server.ThreadingHTTPServer) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_an_elasticsearch_store_that_refuses_the_credentials_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, secured: str
) -> None:
    config = write_config(tmp_path, f'[store]\nurl = "{secured}"\n')
    code, lines, err = check(capsys, config)
    assert code == EXIT_FAILED, err
    assert lines == [
        f"store {secured}: FAILED: elasticsearch {secured}: asking the cluster who it is failed: 401 "
        "security_exception: missing authentication credentials for REST request [/]; check store.username with "
        "password_file or password_env, or store.api_key_file or api_key_env"
    ]


def test_credentials_without_a_privilege_are_told_from_wrong_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, unprivileged: str
) -> None:
    """403: the credentials were accepted (GET / needs a privilege a writer need not have), but
    the index templates, which the probe reads at its first flush, cannot be read with them."""
    config = write_config(tmp_path, f'[store]\nurl = "{unprivileged}"\n')
    code, lines, err = check(capsys, config)
    assert code == EXIT_FAILED, err
    [line] = lines
    assert line.startswith(f"store {unprivileged}: FAILED: elasticsearch {unprivileged}: reading index template "), line
    assert line.endswith(
        "403 security_exception: action [cluster:monitor/main] is unauthorized for user [writer]; the credentials "
        "of store are accepted, without the privilege this needs"
    ), line


def test_a_collector_store_its_healthz_and_the_token(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    collector = Collector(tmp_path / "collector", free_port(), {"p1": "token-one"}, {"flush_every_s": 0.2}).start()
    try:
        token = tmp_path / "token"
        token.write_text("token-one\n")
        token.chmod(0o600)
        url = f"collector+http://127.0.0.1:{collector.port}"
        config = write_config(tmp_path, f'[store]\nurl = "{url}"\ntoken_file = "{token}"\n')
        code, lines, err = check(capsys, config)
        assert (code, lines) == (0, [f"store {url}: ok: /healthz ok, token accepted"]), err

        token.write_text("token-wrong\n")
        code, lines, err = check(capsys, config)
        assert code == EXIT_FAILED, err
        [line] = lines
        assert (
            line.startswith(
                f"store {url}: FAILED: http://127.0.0.1:{collector.port}/v1/records: the collector refused this "
                "probe's token (401: "
            )
            and f"check store.token_file ({token})" in line
        ), line
    finally:
        collector.stop()
    code, lines, err = check(capsys, config)  # stopped: nothing listens
    assert code == EXIT_FAILED, err
    assert lines[0].startswith(
        f"store {url}: FAILED: http://127.0.0.1:{collector.port}/healthz: no answer from the collector ("
    ), lines


def test_a_gratia_store_answers_or_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A Gratia collector has no health check nor token: it answers its servlet's URL (the
    fairacct collector's Gratia endpoint takes POSTs only, and says 405 to a GET), or not."""
    collector = Collector(tmp_path / "collector", free_port(), {"p1": "token-one"}, {"flush_every_s": 0.2}).start()
    url = f"gratia+http://127.0.0.1:{collector.port}/gratia-servlets/rmi"
    config = write_config(tmp_path, f'[store]\nurl = "{url}"\ngratia_site = "EXAMPLE_AP"\n')
    try:
        code, lines, err = check(capsys, config)
        assert (code, lines) == (0, [f"store {url}: ok: the Gratia collector answered (HTTP 405)"]), err
    finally:
        collector.stop()
    code, lines, err = check(capsys, config)
    assert code == EXIT_FAILED, err
    assert lines[0].startswith(
        f"store {url}: FAILED: http://127.0.0.1:{collector.port}/gratia-servlets/rmi: no answer from the Gratia "
        "collector ("
    ), lines


@pytest.mark.parametrize("section", ["store", "upstream"])
def test_a_gratia_sender_without_a_site_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, section: str
) -> None:
    """condor-ap will not run without its SiteName; a Gratia sender with none sent every record to
    GRACC as SiteName 'unknown' while config check said nothing."""
    url = "gratia+https://gratia.example.org/gratia-servlets/rmi"
    config = write_config(tmp_path, f'[{section}]\nurl = "{url}"\ngratia_site = " "\n')
    code, _, err = check(capsys, config)
    assert code == 2 and f"{section}: gratia_site: a Gratia sender must name the access point's site" in err, err
    assert "SiteName 'unknown'" in err


def test_a_collectors_own_store_is_tried_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    down = free_port()
    config = tmp_path / "collector.toml"
    config.write_text(
        f'[collector]\nstate_dir = "{tmp_path / "cstate"}"\n[collector.store]\nurl = "http://127.0.0.1:{down}"\n'
        f'[probe]\nstate_dir = "{tmp_path / "state"}"\n'
    )
    code, lines, err = check(capsys, config, "--timeout", "5")
    assert code == EXIT_FAILED, err
    assert lines[0].startswith(f"store sqlite:///{tmp_path}/state/fairacct.sqlite: ok: not made yet")
    assert lines[1].startswith(f"collector.store http://127.0.0.1:{down}: FAILED: elasticsearch ")


def test_a_collector_only_file_tries_the_collectors_store_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 50, point 5: a file of [collector] alone had the probe's default store tried (beside
    the file, where the collector's host keeps no probe state), and failed with exit 1."""
    (tmp_path / "state").write_text("not a directory: no probe's store can be made here\n")
    config = tmp_path / "collector.toml"
    config.write_text(
        f'[collector]\nstate_dir = "{tmp_path / "cstate"}"\n[collector.store]\nurl = "sqlite:///c.sqlite"\n'
    )
    code, lines, err = check(capsys, config)
    assert code == 0, (lines, err)
    assert len(lines) == 1 and lines[0].startswith(f"collector.store sqlite:///{tmp_path}/cstate/c.sqlite: ok")


def test_the_real_pool_answers(capsys: pytest.CaptureFixture[str], tmp_path: Path, htcondor_pool: HTCondorPool) -> None:
    config = write_config(
        tmp_path,
        f'[pool]\ncondor_config = "{htcondor_pool.condor_config}"\ncollectors = ["{htcondor_pool.address}"]\n'
        'schedds = ["no-such-schedd"]\n[sources]\nlive = true\n',
    )
    code, lines, err = check(capsys, config, "--timeout", "30")
    assert code == 0, (lines, err)
    pool = htcondor_pool.address
    assert lines[0].startswith(f"pool collector {pool}: ok: {pool} answered, 1 schedd(s) known: "), lines
    assert lines[0].endswith("; not among them (pool.schedds): no-such-schedd"), lines
