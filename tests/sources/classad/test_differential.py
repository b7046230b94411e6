"""The fast reader gives the values classad2 gives: on every real fixture, on the demo pool,
and on generated ads full of escapes, expressions, lists and ``undefined``.

classad2 (``parseAds`` + ``eval``) is the oracle. It silently drops an ad it cannot parse;
the reader must then report that ad as malformed instead.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import classad2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import probes.sources.classad.model as classad_module
from probes.sources.classad import Attr, Kind, columns_from_classads, read_ad_files, read_ads
from probes.sources.classad import kernel as classad_lines
from probes.sources.classad_semantics import use_condor_functions

from ...conftest import DEMO


@pytest.fixture(autouse=True, scope="module")
def _condor_functions() -> None:
    """The oracle is classad2 with HTCondor's ClassAd functions, as the reader evaluates: an ad
    this module parses before they are registered calls ``stringListMember`` as an unknown
    function (error), and would pass or fail by what its pytest worker had parsed before."""
    use_condor_functions()


def _oracle(value: Any) -> Any:
    if value is classad2.Value.Undefined:
        return None
    if isinstance(value, list):
        return [_oracle(v) for v in value]
    return value


def _same(expected: Any, got: Any) -> bool:
    if isinstance(expected, (classad2.ClassAd, classad2.ExprTree)):
        expected = str(expected)
    if isinstance(got, (classad2.ClassAd, classad2.ExprTree)):
        got = str(got)
    if isinstance(expected, float) and isinstance(got, float) and math.isnan(expected):
        return math.isnan(got)
    if isinstance(expected, list) and isinstance(got, list):
        return len(expected) == len(got) and all(_same(e, g) for e, g in zip(expected, got, strict=True))
    return type(expected) is type(got) and expected == got


def assert_same_as_classad2(path: Path, text: str | None = None) -> int:
    """Read every attribute of every ad in ``path`` both ways; return the number of ads."""
    text = path.read_text() if text is None else text
    ads = list(classad2.parseAds(text, classad2.ParserType.Old))
    names = sorted({k for ad in ads for k in ad}, key=str.lower)

    def evaluated() -> list[list[Any]]:
        return [[_oracle(ad.eval(name)) if name in ad else None for name in names] for ad in ads]

    # Slot ads say "CurrentTime = time()": classad2 is asked just before and just after the
    # reader, which must give one of the two (they differ only across a second's boundary).
    before = evaluated()
    columns, report = read_ads(path, [Attr(n) for n in names])
    after = evaluated()
    assert len(columns) == len(ads), f"{path}: classad2 read {len(ads)} ads, the reader {len(columns)}"
    assert not report.malformed
    for i in range(len(ads)):
        for k, name in enumerate(names):
            got = columns[name][i]
            assert _same(before[i][k], got) or _same(after[i][k], got), (
                f"{path} ad {i} {name}: classad2 {before[i][k]!r}, reader {got!r}"
            )
    return len(ads)


@pytest.mark.parametrize(
    "relative",
    [
        "condor25/status.ads",
        "condor25/queue.ads",
        "condor25/queue-autocluster.ads",
        "condor25/history.ads",
        "classads/status-partitionable8core.ads",
        "classads/status-glidein-pslot-purdue.ads",
        "classads/history-glidein-job-finished.ad",
    ],
)
@pytest.mark.parametrize("slots_per_name", [4, 1])
def test_every_attribute_of_every_fixture(
    fixtures: Path, relative: str, slots_per_name: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the name table as roomy as the reader makes it, and as full as it can be, so that
    lookups probe past many other names (hundreds of names, as here)."""
    monkeypatch.setattr(classad_lines, "SLOTS_PER_NAME", slots_per_name)
    assert assert_same_as_classad2(fixtures / relative) > 0


def test_per_job_history_files(condor25: Path) -> None:
    files = sorted((condor25 / "per_job_history").iterdir())
    ads = [classad2.parseOne(f.read_text(), classad2.ParserType.Old) for f in files]
    names = sorted({k for ad in ads for k in ad}, key=str.lower)
    columns, report = read_ad_files(files, [Attr(n) for n in names])
    assert len(columns) == len(files) == 12 and not report.malformed
    assert [Path(p).name for p in columns.path] == [f.name for f in files]
    assert set(columns.line) == {1}
    for i, ad in enumerate(ads):
        for name in names:
            assert _same(_oracle(ad.eval(name)) if name in ad else None, columns[name][i]), (files[i], name)


@pytest.mark.parametrize("name", ["status.ads", "queue.ads", "history.ads"])
def test_demo_pool(name: str) -> None:
    assert assert_same_as_classad2(DEMO / name) > 10


def test_json_dump_gives_the_long_dump_values(condor25: Path) -> None:
    """classad2 cannot parse HTCondor 25's -json output, so the oracle here is the -long dump
    of the same instant, already proven equal to classad2 above."""
    for stem in ("status", "history"):
        text = (condor25 / f"{stem}.ads").read_text()
        names = sorted({k for ad in classad2.parseAds(text, classad2.ParserType.Old) for k in ad}, key=str.lower)
        attrs = [Attr(n) for n in names]
        long, _ = read_ads(condor25 / f"{stem}.ads", attrs)
        js, report = read_ads(condor25 / f"{stem}.json", attrs)
        assert len(js) == len(long) > 0 and not report.malformed
        for name in names:
            for i in range(len(long)):
                assert _same(long[name][i], js[name][i]), (
                    f"{stem} ad {i} {name}: -long {long[name][i]!r}, -json {js[name][i]!r}"
                )


# -- generated ads ---------------------------------------------------------------------------

NAMES = [f"A{i}" for i in range(8)]

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\n\r"), max_size=12)


def _string_literal(body: str) -> str:
    return '"' + body + '"'


# string bodies in old ClassAd syntax: a backslash before each quote, other backslashes anywhere
# (before n, t, digits, another backslash, the closing quote), non-ASCII text
_escaped_bodies = st.lists(
    st.sampled_from(["a", " ", "\t", "\\", '\\"', "n", "t", "0", "101", "x41", "u00e9", "é", "€", "'", "/"]),
    max_size=12,
).map("".join)


scalars = st.one_of(
    st.integers(-(2**63), 2**63 + 5).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0.5", ".5", "+1", "-0", "1e3", "1E+03", "2.500000000000000E+00", "-7.25e-3"]),
    _text.map(lambda s: _string_literal(s.replace('"', '\\"'))),
    _text.map(lambda s: _string_literal(s.replace('"', ""))),  # backslashes left as they come
    st.sampled_from(['"a\\\\"', '"x\\\\\\"y"', '"\\\\"', '"tab\\tnew\\nline"', '"é ü"', '"a,b"', '""']),
    _escaped_bodies.map(_string_literal),
    st.sampled_from(["true", "false", "TRUE", "False", "undefined", "UNDEFINED", "error"]),
)
# spellings classad2 refuses, which make the whole ad malformed
bad_values = st.sampled_from(["007", "00", "1.", "5.", "0x10", '"unterminated', "a +* b", ""])
lists = st.lists(scalars.filter(lambda s: "\\" not in s), max_size=4).map(lambda xs: "{ " + ",".join(xs) + " }")
expressions = st.sampled_from(
    [
        "A0 + 1",
        "ifThenElse(A1 =!= undefined, A1, 7)",
        "ifthenelse(MemoryUsage =!= undefined,MemoryUsage,(ImageSize + 1023) / 1024)",
        "A2 * 2.5",
        'strcat("a", "b")',
        "size({ 1,2,3 })",
        "(A0 > 3) && true",
        "Missing",
        "DaemonStartTime + 86400",
        '"a" "b"',
        'eval("A" + "0") * 2',  # a name built at run time: only the whole ad has it
    ]
)
values = st.one_of(scalars, lists, expressions)
names = st.sampled_from([*NAMES, "a0", "MemoryUsage", "ImageSize", "DaemonStartTime"])


def _parses(text: str) -> bool:
    return bool(list(classad2.parseAds(text, classad2.ParserType.Old)))


def _ad_text(ad_lines: list[tuple[str, str]]) -> str:
    return "".join(f"{name} = {value}\n" for name, value in ad_lines)


valid_ads = st.lists(st.tuples(names, values), min_size=1, max_size=10).filter(lambda ls: _parses(_ad_text(ls)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ad_lines=valid_ads)
def test_generated_ads(tmp_path: Path, ad_lines: list[tuple[str, str]]) -> None:
    text = _ad_text(ad_lines)
    path = tmp_path / "generated.ads"
    path.write_text(text)
    oracle = list(classad2.parseAds(text, classad2.ParserType.Old))
    wanted = [*NAMES, "MemoryUsage"]
    columns, report = read_ads(path, [Attr(n) for n in wanted])
    assert len(columns) == 1 and not report.malformed, text
    for name in wanted:
        expected = _oracle(oracle[0].eval(name)) if name in oracle[0] else None
        assert _same(expected, columns[name][0]), f"{name}: classad2 {expected!r}, reader {columns[name][0]!r}\n{text}"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.lists(st.tuples(st.sampled_from(NAMES[1:]), values), max_size=5), bad=bad_values)
def test_a_bad_value_of_a_wanted_attribute_is_never_passed_over(
    tmp_path: Path, before: list[tuple[str, str]], bad: str
) -> None:
    """classad2 is erratic on bad input: it drops the ad, keeps only the lines before the bad
    one, or reads "007" as 7, depending on what precedes. The reader never returns an ad
    without the attribute it could not read: it reports the ad as malformed, naming its file and
    the bad line, or it returns classad2's own value. (A bad value of an attribute that no table
    reads is not looked at by the fast path.)"""
    text = _ad_text([*before, ("A0", bad)])
    path = tmp_path / "bad.ads"
    path.write_text("A0 = 1\n\n" + text)
    columns, report = read_ads(path, [Attr(n) for n in NAMES])
    assert columns["A0"][0] == 1
    oracle = list(classad2.parseAds(text, classad2.ParserType.Old))
    if len(columns) == 2:
        assert not report.malformed and "A0" in oracle[0]
        assert _same(_oracle(oracle[0].eval("A0")), columns["A0"][1])
    else:
        assert len(columns) == 1 and len(report.malformed) == 1
        assert report.malformed[0].path == str(path)
        assert report.malformed[0].line == 3 + len(before)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ads=st.lists(valid_ads, min_size=2, max_size=40))
def test_generated_files_across_chunk_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ads: list[list[tuple[str, str]]]
) -> None:
    """Many ads in one file, read in chunks of a few hundred bytes, give the ad-by-ad values
    and the line each ad starts on."""
    monkeypatch.setattr(classad_module, "CHUNK_BYTES", 256)
    texts = [_ad_text(ad) for ad in ads]
    path = tmp_path / "many.ads"
    path.write_text("\n".join(texts))
    columns, report = read_ads(path, [Attr(n) for n in NAMES])
    assert len(columns) == len(texts) and not report.malformed
    line = 1
    for i, text in enumerate(texts):
        ad = classad2.parseOne(text, classad2.ParserType.Old)
        assert columns.line[i] == line
        line += text.count("\n") + 1
        for name in NAMES:
            expected = _oracle(ad.eval(name)) if name in ad else None
            assert _same(expected, columns[name][i]), (i, name)


def test_typed_columns_follow_classad2_too(condor25: Path) -> None:
    """NUMBER columns are float64 (NaN for missing or undefined), STRING columns str or None."""
    columns, report = read_ads(
        condor25 / "history.ads",
        [
            Attr("RequestMemory", Kind.NUMBER),
            Attr("Owner", Kind.STRING),
            Attr("ExitBySignal", Kind.BOOL),
            Attr("Nope", Kind.NUMBER),
        ],
    )
    ads = list(classad2.parseAds((condor25 / "history.ads").read_text(), classad2.ParserType.Old))
    assert columns["RequestMemory"].dtype.kind == "f"
    assert [float(ad.eval("RequestMemory")) for ad in ads] == columns["RequestMemory"].tolist()
    assert set(columns["Owner"]) == {"condoruser"}
    assert math.isnan(columns["Nope"][0]) and not report.rejects


@pytest.mark.parametrize(
    "given",
    ["MemoryProvisioned = 128", "MemoryProvisioned=128", "memoryprovisioned  =  128", "MemoryProvisioned = undefined"],
)
def test_an_attribute_behind_a_present_one_is_not_read_however_it_is_written(tmp_path: Path, given: str) -> None:
    """``unless``: RequestMemory is not read where MemoryProvisioned is present, whether the
    scan sees that line (canonical) or only classad2 does (any other spelling), as for ads that
    come from classad2 directly."""
    text = f"RequestMemory = 2048\n{given}\nCpus = 1\n"
    attrs = [Attr("MemoryProvisioned", Kind.NUMBER), Attr("RequestMemory", Kind.NUMBER, unless="MemoryProvisioned")]
    columns, report = read_ads(write_ads(tmp_path, text), attrs)
    expected, _ = columns_from_classads([classad2.parseOne(text, classad2.ParserType.Old)], attrs)
    assert math.isnan(columns["RequestMemory"][0]) and math.isnan(expected["RequestMemory"][0])
    assert _same(expected["MemoryProvisioned"][0], columns["MemoryProvisioned"][0]) and not report.malformed


def write_ads(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ads.ads"
    path.write_text(text)
    return path


# -- old ClassAd string escapes ------------------------------------------------------------


def _bodies(alphabet: list[str], longest: int) -> list[str]:
    return ["".join(t) for n in range(longest + 1) for t in itertools.product(alphabet, repeat=n)]


# What an escape means is what classad2 makes of it; these cover each rule: \" is a quote, except
# before the closing one; every other backslash is itself (no \n, \t, octal, \x or \u in
# old syntax), \\ too; a quote after no backslash ends the string early (classad2's to read).
_SPELLINGS = [
    'Proj\\"0\\"-x',
    "a\\nb",
    "a\\tb",
    "\\101",
    "\\0",
    "\\x41",
    "\\u00e9",
    "\\q",
    "\\'",
    "a\\\\b",
    "a\\",
    "a\\\\",
    '\\"',
    '\\\\"',
    'a\\"\\',
    'é\\"€',
    "\u00ff\\",
    'a"b',
    'a" "b',
    '"',
]


def test_every_short_string_over_quotes_and_backslashes(tmp_path: Path) -> None:
    """Every string body of up to 6 characters over a, backslash, quote and é (5,461 ads), and
    the spellings above, read in one file: each ad's value is classad2's, and only the ads
    whose body has a quote after no backslash went to classad2."""
    bodies = _bodies(["a", "\\", '"', "é"], 6) + _SPELLINGS
    path = tmp_path / "strings.ads"
    path.write_text("".join(f'A = "{b}"\nB = {i}\n\n' for i, b in enumerate(bodies)), encoding="utf-8")
    columns, report = read_ads(path, [Attr("A", Kind.STRING), Attr("B", Kind.NUMBER)])
    unescaped_quote = [any(c == '"' and (k == 0 or b[k - 1] != "\\") for k, c in enumerate(b)) for b in bodies]
    assert report.evaluated == sum(unescaped_quote) and not report.malformed
    # classad2 drops the ads it cannot parse (a lone quote after the last backslash, ...); the
    # reader must then have quarantined them: here none, as every ad is read
    assert columns["B"].tolist() == list(range(len(bodies)))
    for i, body in enumerate(bodies):
        ad = classad2.parseOne(f'A = "{body}"\nB = {i}\n', classad2.ParserType.Old)
        assert _same(_oracle(ad.eval("A")) if "A" in ad else None, columns["A"][i]), (
            f"body {body!r}: classad2 {ad.get('A')!r}, reader {columns['A'][i]!r}"
        )


def test_escaped_strings_invalid_utf8_decodes_as_the_whole_ad_would(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 around an escape become U+FFFD, as the whole ad decoded for
    classad2 gives them (a backslash-quote is ASCII, so removing it joins no sequence)."""
    bodies = [b'\xff\\"', b'\xc3\\"\xa9', b'\xe2\x82\\"', b"a\\\xff\\", b'\xf0\\"\\"\x9f']
    path = tmp_path / "bytes.ads"
    path.write_bytes(b"".join(b'A = "' + b + b'"\n\n' for b in bodies))
    columns, report = read_ads(path, [Attr("A", Kind.STRING)])
    assert report.evaluated == 0 and not report.malformed
    for body, got in zip(bodies, columns["A"], strict=True):
        text = (b'A = "' + body + b'"\n').decode("utf-8", "replace")
        assert got == classad2.parseOne(text, classad2.ParserType.Old).eval("A"), body


def test_the_issue_s_escaped_project_name_is_read_without_classad2(tmp_path: Path) -> None:
    """The ad of the issue, as condor_history -long writes it: read on the fast path."""
    path = tmp_path / "history.ads"
    path.write_text(
        'GlobalJobId = "ap#1.0#1"\nProjectName = "Proj\\"0\\"-x"\nOwner = "a\\\\b"\n\n'
        'GlobalJobId = "ap#1.1#1"\nProjectName = "C:\\\\x\\"\nOwner = "plain"\n'
    )
    columns, report = read_ads(
        path, [Attr("GlobalJobId", Kind.STRING), Attr("ProjectName", Kind.STRING), Attr("Owner", Kind.STRING)]
    )
    assert columns["ProjectName"].tolist() == ['Proj"0"-x', "C:\\\\x\\"]
    assert columns["Owner"].tolist() == ["a\\\\b", "plain"]
    assert report.evaluated == 0
