"""The dashboards: every saved object's references resolve, every field a visualization
aggregates exists in the index templates with a type it can aggregate, the NDJSON is what
scripts/make_dashboards.py writes, and the install command at the HTTP boundary."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from collector.dashboards import saved_objects
from collector.errors import SinkError
from collector.sinks.elasticsearch.templates import load_templates
from probes.cli import main

ROOT = Path(__file__).resolve().parents[2]
AGGREGATABLE = {"keyword", "long", "integer", "double", "float", "date", "boolean", "short", "byte"}
NUMERIC = {"long", "integer", "double", "float", "short", "byte"}
OBJECTS = saved_objects()
BY_KEY = {(o["type"], o["id"]): o for o in OBJECTS}


def test_every_reference_resolves() -> None:
    for obj in OBJECTS:
        for ref in obj["references"]:
            assert (ref["type"], ref["id"]) in BY_KEY, (
                f"{obj['type']} {obj['id']} refers to a missing {ref['type']} {ref['id']}"
            )
        meta = obj["attributes"].get("kibanaSavedObjectMeta", {})
        source = json.loads(meta.get("searchSourceJSON", "{}"))
        if "indexRefName" in source:
            assert source["indexRefName"] in {r["name"] for r in obj["references"]}, obj["id"]
        if obj["type"] == "dashboard":
            panels = json.loads(obj["attributes"]["panelsJSON"])
            assert {p["panelRefName"] for p in panels} == {r["name"] for r in obj["references"]}, obj["id"]


def _template_fields(title: str) -> list[dict[str, str]]:
    """The field types of every template whose index pattern the index-pattern title covers."""
    templates = load_templates()
    matched = [
        {n: s.get("type", "object") for n, s in t["template"]["mappings"]["properties"].items()}
        for t in templates.values()
        if any(fnmatch.fnmatch(p, title) or fnmatch.fnmatch(p.replace("*", "x"), title) for p in t["index_patterns"])
    ]
    assert matched, f"no index template matches the index pattern {title!r}"
    return matched


@pytest.mark.parametrize("vis", [o for o in OBJECTS if o["type"] == "visualization"], ids=lambda o: o["id"])
def test_every_field_a_visualization_uses_is_mapped_and_aggregatable(vis: dict[str, Any]) -> None:
    [ref] = vis["references"]
    pattern = BY_KEY[("index-pattern", ref["id"])]["attributes"]
    state = json.loads(vis["attributes"]["visState"])
    for agg in state["aggs"]:
        field = agg["params"].get("field")
        if field is None:
            continue
        for types in _template_fields(pattern["title"]):
            kind = types.get(field)
            assert kind in AGGREGATABLE, (
                f"{vis['id']}: {field} is {kind or 'not mapped'} in a template of {pattern['title']}"
            )
            if agg["type"] in ("sum", "avg", "max", "min", "histogram"):
                assert kind in NUMERIC, f"{vis['id']}: {agg['type']} of {field}, a {kind}"
    assert _template_fields(pattern["title"])[0].get(pattern["timeFieldName"]) == "date"


def test_the_dashboards_cover_what_operators_and_committees_asked_for() -> None:
    titles = " ".join(o["attributes"]["title"] for o in OBJECTS if o["type"] == "visualization")
    for words in ("by partition", "by site", "by pilot phase", "fitting idle", "held against billed",
                  "core-hours used against billed per project", "GPU-hours used against billed per project",
                  "penalty against CPU-only", "fairshare usage against targets", "per probe"):  # fmt: skip
        assert words in titles, words
    assert {o["id"] for o in OBJECTS if o["type"] == "dashboard"} == {"fairacct-operators", "fairacct-committee"}


def test_the_ndjson_is_what_the_script_writes(tmp_path: Path) -> None:
    path = ROOT / "mappings" / "kibana" / "dashboards.ndjson"
    before = path.read_bytes()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_dashboards.py")], check=True, capture_output=True)
    assert path.read_bytes() == before, "mappings/kibana/dashboards.ndjson differs: rerun scripts/make_dashboards.py"


class _Recorder(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []
    status = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        answer = (
            {"success": True, "successCount": body.count(b"\n{"), "errors": []}
            if self.status == 200
            else {"message": "no"}
        )
        data = json.dumps(answer).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def kibana() -> Iterator[tuple[str, type[_Recorder]]]:
    handler = type("Handler", (_Recorder,), {"requests": [], "status": 200})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", handler
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize(("flavour", "header"), [("kibana", "kbn-xsrf"), ("opensearch", "osd-xsrf")])
def test_install_posts_every_object_to_the_import_api(
    kibana: tuple[str, type[_Recorder]], flavour: str, header: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    url, handler = kibana
    config = tmp_path / "c.toml"
    config.write_text('[store]\nusername = "admin"\npassword_env = "KIBANA_PW"\n')
    monkeypatch.setenv("KIBANA_PW", "s3cret")
    code = main(["dashboards", "install", "--config", str(config), "--url", url, "--flavour", flavour])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"imported {len(OBJECTS)} saved objects" in out.out
    [request] = handler.requests
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert request["path"] == "/api/saved_objects/_import?overwrite=true"
    assert headers[header] == "true" and headers["content-type"].startswith("multipart/form-data; boundary=")
    assert headers["authorization"] == "Basic YWRtaW46czNjcmV0"  # admin:s3cret
    part = request["body"].split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n--", 1)[0]
    sent = [json.loads(line) for line in part.decode().splitlines()]
    assert {(o["type"], o["id"]) for o in sent} == set(BY_KEY)


def test_a_refused_import_names_the_url_and_status(kibana: tuple[str, type[_Recorder]]) -> None:
    from collector.dashboards import install_dashboards

    url, handler = kibana
    handler.status = 403
    with pytest.raises(SinkError, match=rf"kibana {url}: importing the saved objects failed with 403"):
        install_dashboards(url)


def test_mappings_ship_in_the_wheel() -> None:
    """Every file of mappings/ but its modules matches the package data pyproject.toml declares for it."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    assert "mappings*" in setuptools["packages"]["find"]["include"]
    globs = setuptools["package-data"]["mappings"]
    files = [
        p.relative_to(ROOT / "mappings").as_posix()
        for p in (ROOT / "mappings").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    # its modules (the declarations of the record kinds) ship as the package's
    unshipped = [f for f in files if not f.endswith(".py") and not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert unshipped == []


# -- the saved objects against the records fairacct writes ---------------------------------------

W0 = 1795266000.0  # 2026-11-21T09:00:00Z, a whole hour: a fairshare window's start


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The fields of every record kind as fairacct writes them: the demo pool through one probe
    cycle and its daily summaries (slot, allocation, job, gap, summary), a fairshare window from
    the ledger and the fairness of the demo's snapshot (the demo closes no fairshare window)."""
    from collector.sinks.sqlite import EmbeddedStore
    from probes.accounting.fairshare import job_usage
    from probes.accounting.ledger import ledger_add
    from probes.config import parse_config
    from probes.pipeline.records import fairshare_docs

    folder = tmp_path_factory.mktemp("demo")
    config = folder / "demo.toml"
    text = (ROOT / "config/demo.toml").read_text().replace('"demo/', f'"{ROOT}/config/demo/')
    config.write_text(text.replace('"../.demo"', '"state"'))
    assert main(["probe", "once", "--config", str(config)]) == 0
    assert main(["summarize", "--config", str(config), "--from", "2026-11-01", "--to", "2026-11-30"]) == 0
    fields: dict[str, set[str]] = {}
    with EmbeddedStore(folder / "state" / "fairacct.sqlite") as store:
        for kind in ("slot", "allocation", "job", "gap", "summary", "fairness"):
            docs = store.query(kind, since="2026-11-01T00:00:00Z", until="2026-12-01T00:00:00Z", limit=10_000)
            fields[kind] = {f for d in docs for f, v in d.items() if v is not None}
    policy = parse_config({"fairshare": {"interval_s": 3600, "depth": 2, "targets": {"user": {"alice": "50"}}}})
    jobs = pd.DataFrame(
        {"user": ["alice"], "group": ["group_cms"], "project": ["CMS_Production"], "queue": [None], "qos": [None],
         "submitter": ["group_cms.alice@demo"], "end": [W0 + 1800], "walltime_s": [3600.0], "cpus": [2.0],
         "n_hosts": [1]}
    )  # fmt: skip
    rows = ledger_add([], jobs, job_usage(jobs, "dedicated_ps"), now=W0 + 3000, interval_s=3600, depth=2)
    fields["fairshare"] = {f for d in fairshare_docs(rows, W0, policy, probe="test").decoded() for f in d}
    return fields


def _kinds(title: str) -> list[str]:
    """The record kinds an index pattern's title covers (fairacct-<kind>-*)."""
    templates = load_templates()

    def covers(pattern: str) -> bool:
        return fnmatch.fnmatch(pattern, title) or fnmatch.fnmatch(pattern.replace("*", "x"), title)

    return [k for k, t in templates.items() if any(covers(p) for p in t["index_patterns"])]


@pytest.mark.parametrize("vis", [o for o in OBJECTS if o["type"] == "visualization"], ids=lambda o: o["id"])
def test_every_field_a_visualization_uses_is_in_the_records_written(
    vis: dict[str, Any], written: dict[str, set[str]]
) -> None:
    """A field renamed in a record (and its template) would leave a panel empty without a word: every
    field an aggregation, the index pattern's time field or a saved query names is in the records of
    a kind the index pattern covers, as the probe and the summaries write them."""
    [ref] = vis["references"]
    pattern = BY_KEY[("index-pattern", ref["id"])]["attributes"]
    kinds = [k for k in _kinds(pattern["title"]) if k in written]
    assert kinds, pattern["title"]
    state = json.loads(vis["attributes"]["visState"])
    search = json.loads(vis["attributes"]["kibanaSavedObjectMeta"]["searchSourceJSON"])
    used = {a["params"]["field"] for a in state["aggs"] if a["params"].get("field")} | {pattern["timeFieldName"]}
    used |= set(re.findall(r"([A-Za-z_][\w.]*)\s*:", search.get("query", {}).get("query", "")))
    used |= {f["meta"]["key"] for f in search.get("filter", []) if f.get("meta", {}).get("key")}
    for field in sorted(used):
        assert any(field in written[k] for k in kinds), f"{vis['id']}: no record of {kinds} has {field!r}"
    for agg in state["aggs"]:  # and the type each aggregation needs, in every template the pattern covers
        field = agg["params"].get("field")
        needs = {"date_histogram": {"date"}, "histogram": NUMERIC, "sum": NUMERIC, "avg": NUMERIC, "max": NUMERIC,
                 "min": NUMERIC, "terms": AGGREGATABLE}.get(agg["type"])  # fmt: skip
        if field and needs:
            for types in _template_fields(pattern["title"]):
                assert types.get(field) in needs, f"{vis['id']}: {agg['type']} of {field}, a {types.get(field)}"


def test_the_overhead_histogram_is_on_the_operators_dashboard() -> None:
    vis = BY_KEY[("visualization", "fairacct-overhead-cu-by-partition")]
    state = json.loads(vis["attributes"]["visState"])
    assert state["type"] == "histogram"
    assert [(a["type"], a["params"].get("field")) for a in state["aggs"]] == [
        ("count", None),
        ("histogram", "overhead_cu"),
        ("terms", "partition"),
    ]
    assert [a["params"].get("interval") for a in state["aggs"] if a["type"] == "histogram"] == [1]  # whole CUs
    panels = {r["id"] for r in BY_KEY[("dashboard", "fairacct-operators")]["references"]}
    assert {
        "fairacct-overhead-cu-by-partition",
        "fairacct-overhead-cu-by-site",
        "fairacct-overhead-cu-by-phase",
    } <= panels
