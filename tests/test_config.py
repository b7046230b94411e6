"""Configuration: validated on load, with messages that name the key and what was expected."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from collector.errors import ConfigError
from probes.config import COLLECTOR_STORE_NOTE, ProbeConfig, apply_overrides, load_config, parse_config
from probes.units import parse_size

from .conftest import ROOT


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"sources": {"statsu_files": []}}, "sources.statsu_files: unknown key; did you mean 'status_files'?"),
        (
            {"bogus": 1},
            "bogus: unknown key; expected one of pool, sources, credentials, site, machines, partitions, store, "
            "upstream, probe, log, penalty, fairshare, priority, summaries, fairness, collector, apel, awards",
        ),
        (
            {"partitions": [{"name": "cpu", "memory": "2 gigs"}]},
            'partitions[0].memory: expected a size like "2 GiB", "512 MiB" or "4 GB", got \'2 gigs\'',
        ),
        (
            {"partitions": [{"name": "cpu", "match": "TotalSlotGPUs >", "cpus": 1}]},
            "partitions[0].match: expected a ClassAd expression, got 'TotalSlotGPUs >' (classad2 cannot parse it)",
        ),
        ({"pool": {"interval_s": "300"}}, "pool.interval_s: expected a number, got '300'"),
        ({"pool": {"interval_s": 0}}, "pool.interval_s: expected a number greater than 0, got 0"),
        ({"sources": {"strict": "yes"}}, "sources.strict: expected true or false, got 'yes'"),
        ({"sources": {"status_files": "a.ads"}}, "sources.status_files: expected a list, got 'a.ads'"),
        ({"pool": {"name": 5}}, "pool.name: expected a string, got 5"),
        (
            {"partitions": [{"name": "cpu"}]},
            "partitions[0]: a partition needs at least one of cpus, memory, disk, gpus greater than 0",
        ),
        (
            {"partitions": [{"name": "a", "cpus": 1}, {"name": "a", "gpus": 1}]},
            "partitions: partition names must be unique, got 'a' more than once",
        ),
        ({"partitions": [{"cpus": 1}]}, "partitions[0].name: required key is missing"),
        (
            {"partitions": {"cpu": {"cpus": 1}}},
            "partitions: expected a list of tables ([[partitions]]), got {'cpu': {'cpus': 1}}",
        ),
        ({"partitions": [{"name": "g", "gpus": -1}]}, "partitions[0].gpus: expected a number at least 0, got -1"),
    ],
)
def test_error_messages_word_for_word(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "site.toml")
    assert str(info.value) == f"site.toml: {message}"


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"pool": {"name": 1, "interval_s": "x"}}, "site.toml")
    assert str(info.value).splitlines() == [
        "site.toml: pool.name: expected a string, got 1",
        "site.toml: pool.interval_s: expected a number, got 'x'",
    ]


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: no such configuration file$"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[pool\nname = 1\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML: .*line 1"):
        load_config(bad)


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [("2 GiB", 1024**2, 2048), ("2GB", 1024**2, 2048), ("2 gb", 1024**2, 2048), ("2G", 1024**2, 2048),
     ("512 MiB", 1024**2, 512), (4096, 1024**2, 4096),
     ("10 GB", 1024, 10485760), ("1 KB", 1024, 1), ("1.5 TiB", 1024**2, 1572864)],
)  # fmt: skip
def test_sizes(value: str | int, unit: int, expected: float) -> None:
    assert parse_size(value, unit) == expected


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "probe.toml"
    path.write_text('[sources]\nstatus_files = ["dumps/status.ads", "/abs/s.ads"]\n[probe]\nstate_dir = "../state"\n')
    config = load_config(path)
    assert config.sources.status_files == [tmp_path / "conf/dumps/status.ads", Path("/abs/s.ads")]
    assert config.probe.state_dir == tmp_path / "state"


def test_command_line_overrides_replace_the_file() -> None:
    config = load_config(ROOT / "config/demo.toml")
    over = apply_overrides(config, {"status_file": ["x.ads"], "history": [], "store": "sqlite:///other.sqlite"})
    assert over.sources.status_files == [Path("x.ads").absolute()]
    assert over.sources.history == config.sources.history  # not given: kept
    assert over.store.url == "sqlite:///other.sqlite"


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        args = [field.annotation, *getattr(field.annotation, "__args__", ())]
        sub = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
        out += _keys(sub, f"{prefix}{name}.") if sub is not None else [f"{prefix}{name}"]
    return out


def _flat(table: Mapping[str, Any], model: type[BaseModel], prefix: str = "") -> list[str]:
    """The key paths a TOML table sets, following the model's sections (a list of tables' keys
    once; a table a key holds as its value, e.g. penalty.standard_job, is one key)."""
    out = []
    for key, value in table.items():
        field = model.model_fields.get(key)
        args = [field.annotation, *getattr(field.annotation, "__args__", ())] if field else []
        sub = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
        for item in value if sub is not None and isinstance(value, list) else [value]:
            out += _flat(item, sub, f"{prefix}{key}.") if sub is not None else [f"{prefix}{key}"]
    return out


def test_the_example_documents_every_key_and_is_the_default() -> None:
    """config/example.toml sets every key, each with a comment, to its default."""
    text = (ROOT / "config/example.toml").read_text()
    raw = tomllib.loads(text)
    flat = set(_flat(raw, ProbeConfig))
    # documented, commented out: disk, and an entry of collector.probes (the default lists none)
    expected = (
        set(_keys(ProbeConfig)) - {"partitions.disk"} - {f"collector.probes.{k}" for k in ("probe", "sites", "pools")}
    )
    assert '# e.g. probes = [{probe = "fairacct@ce01.example.org", sites = ["SiteA"], pools = [' in text
    assert expected <= flat, f"not in config/example.toml: {sorted(expected - flat)}"
    assert "collector.store.url" in flat and "store.url" in flat  # the collector's store, a section of its own
    # every section and key is preceded by a comment line
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[a-z_]+ = ", line):
            before = [x for x in lines[:i] if x.strip()]
            assert before and (before[-1].startswith(("#", "[[")) or re.match(r"^[a-z_]+ = ", before[-1])), line
    assert parse_config(raw) == ProbeConfig()
    assert "disk" in text  # documented, left commented out


def test_the_demo_config_loads() -> None:
    config = load_config(ROOT / "config/demo.toml")
    assert config.pool.name == "demo"
    assert all(p.exists() for p in (*config.sources.status_files, *config.sources.idle_files, *config.sources.history))
    assert config.probe.state_dir == ROOT / ".demo"
    # the committee's awards file, relative to the configuration; the VOs of the demo's accounting groups
    assert config.awards.file == str(ROOT / "config/demo/awards.csv") and Path(config.awards.file).is_file()
    assert config.apel.vo_map == {"group_atlas": "atlas", "group_cms": "cms", "group_osg": "osg"}


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ('url = "mysql://db.example.org/acct"',
         "store.url: expected sqlite:///PATH, http(s)://HOST:PORT, opensearch+http(s)://HOST:PORT, "),
        ('url = "http://elastic:hunter2@es.example.org:9200"',
         "store.url: credentials in the URL are not accepted (http://es.example.org:9200)"),
        ('url = "https://es.example.org:9200"\nusername = "fairacct"\npassword_file = "/nonexistent/es-password"',
         "password_file: cannot read '/nonexistent/es-password'"),
    ],
)  # fmt: skip
def test_config_check_validates_what_the_commands_do_and_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str, message: str
) -> None:
    """Issue 12, item 3: `config check` accepted a store every other command refused, and
    printed the password of a URL."""
    from probes.cli import main

    path = tmp_path / "probe.toml"
    path.write_text(f"[store]\n{store}\n")
    assert main(["config", "check", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err and "hunter2" not in err


def test_config_check_of_a_good_store_prints_references_to_secrets_not_their_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from probes.cli import main

    monkeypatch.setenv("FAIRACCT_TEST_ES_KEY", "c2VrcmV0LWFwaS1rZXk=")
    path = tmp_path / "probe.toml"
    path.write_text('[store]\nurl = "https://es.example.org:9200"\napi_key_env = "FAIRACCT_TEST_ES_KEY"\n')
    assert main(["config", "check", "--config", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"api_key_env": "FAIRACCT_TEST_ES_KEY"' in out and "c2VrcmV0" not in out
    assert not (tmp_path / "state").exists()  # nothing was created to check it
    assert main(["config", "check", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [  # issue 50, point 5: not 300 lines of defaults
        f"configuration ok: {path}",
        '  store.url = "https://es.example.org:9200"',
        '  store.api_key_env = "FAIRACCT_TEST_ES_KEY"',
        "every other key at its default (--json prints them all)",
    ]


# -- issue 29, class 6: config check refuses what the commands would fail on --------------------------------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("memory", "[1, 2]", 'partitions[1].memory: expected a size like "2 GiB" or a number, got [1, 2]'),
        ("max_body_size", "{ a = 1 }", "collector.max_body_size: expected a number, got {'a': 1}"),
        ("max_body_size", "1979-05-27", "collector.max_body_size: expected a number, got datetime.date(1979, 5, 27)"),
        ("standard_job", '{ cpus = 1, memory = 07:32:00 }',
         'penalty.standard_job: memory: expected a size like "2 GiB" or a number, got datetime.time(7, 32)'),
        ("state_dir", '"state\\u0000x"',
         "probe.state_dir: a NUL character cannot be in a value (a path, a name or an expression), got 'state\\x00x'"),
        ("token_file", '"t\\u0000"', "pool.token_file: a NUL character cannot be in a value"),
        ("flush_every_s", "1e308", "probe.flush_every_s: expected at most 1e+09 seconds (about 31 years), got 1e+308"),
        ("misfire_grace_s", "1e308", "probe.misfire_grace_s: expected at most 1e+09 seconds"),
        ("store_stale_s", "inf", "collector.store_stale_s: expected a finite number, got inf"),
        ("max_body_size", "1e-320", "collector.max_body_size: expected a size of 0 or at least one byte, got 1e-320"),
        ("max_records_body_size", '"99999999999999999 TiB"', "collector.max_records_body_size: expected a size below"),
        ("max_outbox_depth", "99999999999999999999", "collector.max_outbox_depth: expected an integer within 64 bits"),
        ("gpu_weight", "nan", "penalty.gpu_weight: expected a finite number, got nan"),
    ],
)  # fmt: skip
def test_config_check_refuses_what_the_commands_would_fail_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str, message: str
) -> None:
    """Each value passed `config check` and then failed `probe once`, `probe run` or `collector
    serve` (TypeError, 'embedded null byte', OverflowError, a scheduler whose jobs all fail), or
    was a TypeError of the check itself (exit 1). Both go through load_config, so a refusal
    there is a refusal everywhere: exit 2 and one line naming the key."""
    from probes.cli import main

    example = (ROOT / "config/example.toml").read_text()
    text, n = re.subn(rf"(?m)^{key} = .*$", lambda _: f"{key} = {value}", example, count=1)
    assert n == 1
    path = tmp_path / "fairacct.toml"
    path.write_text(text)
    assert main(["config", "check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fairacct: configuration error: {path}: {message}") and err.count("\n") == 1, err
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_sizes_refuse_what_is_no_size() -> None:
    for bad in ([1], {"a": 1}, float("inf"), float("nan"), 2.0**60, "1" * 400 + " GiB"):
        with pytest.raises(ValueError, match="expected a size"):
            parse_size(bad, 1024**2)  # type: ignore[arg-type]  # what a TOML file can hold
    with pytest.raises(ValueError, match="at least one byte"):
        parse_size(1e-320, 1)
    assert parse_size(0, 1) == 0.0 and parse_size("2 GB", 1024**2) == 2048.0


# -- issue 38: the collector's store is [collector.store]; a file that gives it in [store] still works --------


def test_the_collectors_store_is_its_own_section() -> None:
    """[collector.store] is the collector's store; the probe's [store] (here another collector,
    which the probe may send to) is not read for it."""
    config = parse_config(
        {
            "store": {"url": "collector+https://c.example.org", "token_file": "/t"},
            "collector": {"store": {"url": "https://es.example.org:9200", "api_key_env": "ES_KEY"}},
        }
    )
    assert not config.collector_store_from_probe
    store = config.collector_settings().store
    assert (store.url, store.index_prefix, store.api_key_env) == ("https://es.example.org:9200", "fairacct", "ES_KEY")


def test_without_a_collector_store_the_collector_keeps_its_old_default() -> None:
    """Neither section: the store a collector had before (the embedded one under its state_dir)."""
    config = parse_config({"collector": {"port": 9000}})
    assert not config.collector_store_from_probe
    assert config.collector_settings().store.url == "sqlite:///fairacct.sqlite" == ProbeConfig().store.url


def test_a_collector_file_with_its_store_in_store_still_works_and_says_so(tmp_path: Path) -> None:
    """A file written before [collector.store] gives the collector's store in [store]: it is
    read as before (the probe's token_file left out), and `collector serve` says where to move it."""
    path = tmp_path / "collector.toml"
    path.write_text('[collector]\nport = 9000\n[store]\nurl = "https://es.example.org:9200"\nusername = "u"\n')
    config = apply_overrides(load_config(path), {})
    assert config.collector_store_from_probe
    store = config.collector_settings().store
    assert (store.url, store.username) == ("https://es.example.org:9200", "u")
    assert "[collector.store]" in COLLECTOR_STORE_NOTE and "[store]" in COLLECTOR_STORE_NOTE
    # --store replaces the URL of whichever store the collector reads, and is no [store] of the file
    assert config.collector_settings(store_url="sqlite:///s.sqlite").store.username == "u"
    path.write_text("[collector]\nport = 9000\n")
    over = apply_overrides(load_config(path), {"store": "https://other.example.org:9200"})
    assert not over.collector_store_from_probe
    assert over.collector_settings(store_url="https://other.example.org:9200").store.url == (
        "https://other.example.org:9200"
    )


@pytest.mark.parametrize(
    ("raw", "store_url", "message"),
    [
        ({"store": {"url": "collector+https://c.example.org"}}, None,
         "store.url: the collector needs a store of its own, got another collector: 'collector+https://c.example.org' "
         "(without [collector.store], the collector's store is read from [store]; give it its own there)"),
        ({}, "collector+http://127.0.0.1:1",
         "collector.store.url: the collector needs a store of its own, got another collector: "
         "'collector+http://127.0.0.1:1' (given by --store)"),
        ({}, "mysql://db", "collector.store.url: expected sqlite:///PATH, http(s)://HOST:PORT"),
    ],
)  # fmt: skip
def test_the_collector_refuses_another_collector_as_its_store(
    raw: dict[str, object], store_url: str | None, message: str
) -> None:
    config = parse_config(raw)
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.collector_settings(store_url=store_url)


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ({"url": "collector+https://c.example.org"},
         "collector.store.url: the collector needs a store of its own, got another collector: "
         "'collector+https://c.example.org'"),
        ({"token_file": "/t"}, "collector.store.token_file: unknown key; did you mean 'api_key_file'?"),
        ({"ur": "sqlite:///a.sqlite"}, "collector.store.ur: unknown key; did you mean 'url'?"),
    ],
)  # fmt: skip
def test_the_collector_store_section_is_checked_on_load(store: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"collector": {"store": store}}, "collector.toml")
    assert str(info.value).startswith(f"collector.toml: {message}")


def test_collector_serve_says_it_reads_store_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The note is printed before anything starts (here the state directory is a file, so
    nothing does)."""
    from probes.cli import main

    (tmp_path / "busy").write_text("")
    path = tmp_path / "collector.toml"
    path.write_text('[collector]\nstate_dir = "busy"\n[store]\nurl = "sqlite:///s.sqlite"\n')
    assert main(["collector", "serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"fairacct: note: {COLLECTOR_STORE_NOTE}" and "collector.state_dir" in err[1], err
    path.write_text('[collector]\nstate_dir = "busy"\n[collector.store]\nurl = "sqlite:///s.sqlite"\n')
    assert main(["collector", "serve", "--config", str(path)]) == 2
    assert "note" not in capsys.readouterr().err


# -- issue 41, point 8: config check runs the checks the commands run -----------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('name = "gpu"', 'name = ""', "partitions[0].name: String should have at least 1 character, got ''"),
        ('name = "gpu"', 'name = "  "', "partitions[0].name: String should match pattern"),
        ('resources = ["cpus", "memory"]', "resources = []",
         "penalty.resources: List should have at least 1 item after validation, not 0, got []"),
        ("depth = 8", "depth = 100000000", "fairshare.depth: expected a number at most 10000, got 100000000"),
        ('state_dir = "state"', 'state_dir = "' + "/".join(["d"] * 2000) + '"',
         "probe.state_dir: a path 2000 folders deep, more than 256"),
        ('state_dir = "state"', 'state_dir = "' + "x" * 256 + '"',
         "probe.state_dir: a path whose part 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... is 256 bytes long, "
         "more than the 255 a file name may be"),
        ("class_attributes = []", "class_attributes = " + "[" * 600 + "]" * 600,
         "not valid TOML: arrays or tables nested deeper than can be read"),
    ],
    ids=["partition-empty", "partition-blank", "no-resources", "depth", "deep-state", "long-name", "toml-600"],
)  # fmt: skip
def test_config_check_refuses_what_probe_once_fails_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], old: str, new: str,
    message: str,
) -> None:  # fmt: skip
    """Each passed `config check` and then failed `probe once` (ValueError, 2.5 GiB of windows,
    RecursionError), or was a traceback of both: now both exit 2 naming the key."""
    from probes.cli import main

    example = (ROOT / "config/example.toml").read_text()
    assert f"\n{old}\n" in example
    path = tmp_path / "fairacct.toml"
    path.write_text(example.replace(f"\n{old}\n", f"\n{new}\n", 1))
    monkeypatch.chdir(tmp_path)
    for command in (["config", "check"], ["probe", "once"]):
        assert main([*command, "--config", str(path)]) == 2, command
        err = capsys.readouterr().err
        assert err.startswith(f"fairacct: configuration error: {path}: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO"])
def test_config_check_refuses_a_user_vo_map_that_is_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A user-vo-map that is a device or a FIFO: `config check` passed it, and `probe once` read
    /dev/zero without end or blocked on the FIFO for ever."""
    from probes.cli import main

    if kind == "a FIFO":
        os.mkfifo(tmp_path / "vo.map")
        vo_map, what = tmp_path / "vo.map", "a FIFO (named pipe)"
    else:
        vo_map, what = Path("/dev/zero"), "a character device"
    path = tmp_path / "fairacct.toml"
    (tmp_path / "h.ads").write_bytes((ROOT / "config/demo/history.ads").read_bytes())
    path.write_text(f'[sources]\nhistory = ["h.ads"]\n[credentials]\nuser_vo_map = "{vo_map}"\n')
    monkeypatch.chdir(tmp_path)
    for command in (["config", "check"], ["probe", "once"]):
        assert main([*command, "--config", str(path)]) == 2, command
        err = capsys.readouterr().err
        assert err == (
            f"fairacct: configuration error: credentials.user_vo_map: {vo_map}: is {what}, "
            "expected a user-vo-map (lines of 'account vo') in a regular file\n"
        ), err


def test_a_configuration_that_is_a_fifo_is_refused_before_it_blocks(tmp_path: Path) -> None:
    """main blocked in read_text() for ever; run in a process of its own so that it fails, not hangs."""
    import subprocess
    import sys

    fifo = tmp_path / "fairacct.toml"
    os.mkfifo(fifo)
    command = [str(Path(sys.executable).parent / "fairacct"), "config", "check", "--config", str(fifo)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr == (
        f"fairacct: configuration error: {fifo}: is a FIFO (named pipe), "
        "expected a TOML configuration in a regular file\n"
    )


def test_config_check_opens_each_schedds_history_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pool.history_files``: a schedd's file missing, a rotation unreadable (a FIFO), or a
    constraint that files cannot apply is refused naming the key; the files there, it passes."""
    from probes.cli import main

    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "history").write_bytes((ROOT / "config/demo/history.ads").read_bytes())
    path = tmp_path / "fairacct.toml"
    monkeypatch.chdir(tmp_path)

    def check(pool: str) -> tuple[int, str]:
        path.write_text(f"[pool]\n{pool}\n[sources]\nlive = true\n")
        code = main(["config", "check", "--config", str(path)])
        return code, capsys.readouterr().err

    good = f'history_files = {{ ap1 = "{spool / "history"}" }}'
    assert check(good)[0] == 0
    code, err = check(f'history_files = {{ ap1 = "{tmp_path / "nothing" / "history"}" }}')
    assert code == 2 and "pool.history_files.ap1: " in err and "cannot be listed" in err
    os.mkfifo(spool / "history.20261101T000000")
    code, err = check(good)
    assert code == 2 and "pool.history_files.ap1: " in err and "history.20261101T000000" in err and "FIFO" in err
    code, err = check(good + '\njob_constraint = "Owner == \\"x\\""')
    assert code == 2 and "job_constraint cannot be applied to them" in err
    code, err = check('history_files = { ap1 = "spool/history" }')
    assert code == 2 and "expected an absolute path" in err
