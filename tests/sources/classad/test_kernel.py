"""The compiled scan's parts against plain Python doing the same on the same bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.sources.classad import kernel as cl

PAD = b"\0" * 8


def scan(text: bytes, names: list[str]) -> cl.Lines:
    return cl.scan_lines(text + PAD, len(text), cl.NameTable.build(names))


def test_ads_lines_and_values() -> None:
    text = b'Owner = "alice"\nclusterid = 12\n\n*** banner\nOWNER = "bob"\nRequestMemory = 2 * 1024\nQDate = 1.5\n'
    found = scan(text, ["Owner", "ClusterId", "RequestMemory", "QDate"])
    assert found.n_lines == 7
    assert found.first_line.tolist() == [0, 4] and not found.odd.any()
    assert [text[b:e] for b, e in zip(found.begin, found.end, strict=True)] == [text[:31], text[43:]]
    assert found.literal.tolist() == [
        [cl.STRING, cl.INT, cl.ABSENT, cl.ABSENT],
        [cl.STRING, cl.ABSENT, cl.NUMBER_TEXT, cl.REAL],
    ]
    assert found.integer[0, 1] == 12 and found.number[1, 3] == 1.5
    s, e = found.value_start[1, 0], found.value_end[1, 0]
    assert text[s:e] == b'"bob"'


@pytest.mark.parametrize(
    "line",
    [
        b"Foo-Bar = 1",
        b"Foo  = 1",
        b"Foo =  1",
        b"Foo=1",
        b" Foo = 1",
        b"9Foo = 1",
        b"A\x7fB = 1",
        b"Caf\xc3\xa9 = 1",
        b"Foo",
    ],
)
def test_a_line_not_in_canonical_form_makes_its_ad_classad2s(line: bytes) -> None:
    found = scan(b"A_B = 1\n" + line + b"\n\nA_B = 2\n", ["A_B"])
    assert found.odd.tolist() == [True, False]
    assert found.integer[:, 0].tolist() == [1, 2]  # found all the same; the caller decides


def test_names_are_case_insensitive_and_exact() -> None:
    names = ["A_B", "ab", "Abc", "LongAttributeNameOverEight", "LongAttributeNameOverEightX", "x.y"]
    text = (
        b"a_b = 1\nAB = 2\nabC = 3\nlongattributenameovereight = 4\nLONGATTRIBUTENAMEOVEREIGHTX = 5\nAbcd = 6\n"
        b"LongAttributeNameOverEigh = 7\n"
    )
    found = scan(text, names)
    assert found.integer[0].tolist() == [1, 2, 3, 4, 5, 0] and not found.odd.any()
    assert found.literal[0, 5] == cl.ABSENT  # no identifier: never looked up
    with pytest.raises(ValueError, match="distinct case-insensitively"):
        cl.NameTable.build(["Owner", "OWNER"])


def test_a_chunk_of_many_ads_grows_its_rows() -> None:
    text = b"".join(b"N = %d\n\n" % i for i in range(5000))
    found = scan(text, ["N"])
    assert found.integer[:, 0].tolist() == list(range(5000))
    assert found.first_line.tolist() == list(range(0, 10000, 2))


def test_a_line_of_white_space_only_ends_an_ad_when_asked() -> None:
    """With ``white_lines`` (the -long reader), a line of spaces and tabs only is a blank line, as
    classad2 reads it: 3 ads, the white lines still counted as lines (8 in all). A line that
    starts with white space and holds more is no blank line: its ad is classad2's (odd). A
    white line at the start of a chunk and one that is the last line end nothing: no empty ads."""
    text = b" \t\nA = 1\n  \nA = 2\n \tA = 3\n\t\nA = 4\n \n"
    names = ["A"]
    found = cl.scan_lines(text + PAD, len(text), cl.NameTable.build(names), white_lines=True)
    assert found.n_lines == 8
    assert found.first_line.tolist() == [1, 3, 6] and found.odd.tolist() == [False, True, False]
    ads = [text[b:e] for b, e in zip(found.begin, found.end, strict=True)]
    assert ads == [b"A = 1\n", b"A = 2\n \tA = 3\n", b"A = 4\n"]
    # "A = 3" after white space is not looked up: an odd ad is classad2's to read whole
    assert found.integer[:, 0].tolist() == [1, 2, 4]
    # without: every white line is a line of its ad (odd), as in a per-job history file
    plain = scan(text, names)
    assert plain.first_line.tolist() == [0] and plain.odd.tolist() == [True]


@pytest.mark.parametrize("length", range(20))
def test_string_literals_at_every_offset(length: int) -> None:
    """The quote and backslash test reads 8 bytes at a time: each position of each length. A
    backslash, or a quote after one, is an escaped string; a quote after none is not a string
    literal (it ends the string early)."""
    assert scan(b'S = "' + b"x" * length + b'"\n', ["S"]).literal[0, 0] == cl.STRING
    for at in range(length):
        for odd, literal in ((b'"', cl.OTHER), (b"\\", cl.ESCAPED), (b'\\"', cl.ESCAPED), (b'\\""', cl.OTHER)):
            body = b"x" * at + odd + b"x" * (length - at - 1)
            assert scan(b'S = "' + body + b'"\n', ["S"]).literal[0, 0] == literal, body


@pytest.mark.parametrize(
    ("value", "literal", "number"),
    [
        (b"0", cl.INT, 0),
        (b"-0", cl.INT, -0.0),
        (b"123456789012345678", cl.INT, 123456789012345678),
        (b"1234567890123456789", cl.NUMBER_TEXT, None),  # beyond 18 digits: Python's, then classad2's
        (b"007", cl.NUMBER_TEXT, None),
        (b"-", cl.NUMBER_TEXT, None),
        (b"1.", cl.NUMBER_TEXT, None),
        (b"1e5", cl.NUMBER_TEXT, None),
        (b"-12.5", cl.REAL, -12.5),
        (b"0.1", cl.REAL, 0.1),
        (b"1735691166.123456", cl.NUMBER_TEXT, None),  # 16 digits: more than M / 10**f does exactly
        (b"173569116.123456", cl.REAL, 173569116.123456),
        (b"TRUE", cl.TRUE, None),
        (b"False", cl.FALSE, None),
        (b"Undefined", cl.UNDEFINED, None),
        (b"{ 1, 2 }", cl.LIST, None),
        (b"{ 1, 2 } + 1", cl.OTHER, None),
        (b"MY.X", cl.OTHER, None),
        (b"", cl.OTHER, None),
        (b'"\\"', cl.ESCAPED, None),  # a backslash before the closing quote is itself
        (b'"\\\\"', cl.ESCAPED, None),
        (b'"a\\"b"', cl.ESCAPED, None),
        (b'"a"b"', cl.OTHER, None),
        (b'"a" "b"', cl.OTHER, None),
        (b'"\\""', cl.ESCAPED, None),
        (b'"""', cl.OTHER, None),
    ],
)
def test_literals(value: bytes, literal: int, number: float | None) -> None:
    found = scan(b"V = " + value + b"\n", ["V"])
    assert found.literal[0, 0] == literal
    if number is not None:
        assert str(found.number[0, 0]) == str(float(number))  # the same double, sign of zero too


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=20).filter(lambda b: b"\n" not in b), max_size=40))
def test_texts_decode_as_each_slice_would(parts: list[bytes]) -> None:
    data = b"|".join(parts) + PAD
    starts = np.cumsum([0] + [len(p) + 1 for p in parts[:-1]]).astype(np.int64) if parts else np.zeros(0, np.int64)
    ends = starts + np.array([len(p) for p in parts], dtype=np.int64)
    assert cl.texts(data, starts, ends) == [p.decode("utf-8", "replace") for p in parts]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"", b"a", b"group_cms", b"group_cmS", b"x" * 8, b"x" * 9, b"x" * 17, b"y" * 17]), max_size=60
    )
)
def test_first_equal_finds_the_first_of_each_text(parts: list[bytes]) -> None:
    data = b"".join(parts) + PAD
    ends = np.cumsum([len(p) for p in parts]).astype(np.int64)
    starts = ends - np.array([len(p) for p in parts], dtype=np.int64)
    first = cl.first_equal(data, starts, ends)
    expected: dict[bytes, int] = {}
    assert first.tolist() == [expected.setdefault(p, i) for i, p in enumerate(parts)]
