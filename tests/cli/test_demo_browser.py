"""The demo's report opened as a committee member opens it: headless Chromium at 1280 and 1920 px.
What the first screen holds is read two ways, neither by comparing pixels with a reference: the
layout (a copy of the page with a script that writes each element's box into the DOM, read back
with --dump-dom; the report itself has no script) and the screenshot of the page itself (its
colours: the totals' box and the over-award row within the first screen)."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import zlib
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from ..collector.test_report import CHROMIUM_FLAGS, _chromium
from .test_demo import demo  # noqa: F401  (the fixture: `make demo`'s commands into a temporary directory)

SCREEN_H = 900  # px: a laptop's first screen, the browser's own bars taken off
TOTALS_BG = (0xF4, 0xF7, 0xFD)  # p.totals in collector/report/page.py's style
OVER_BG = (0xFD, 0xE2, 0xDD)  # table.committee tr.over td

_LAYOUT = """<script>
addEventListener("load", () => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const facts = {
    width: innerWidth, height: innerHeight, scrollWidth: document.documentElement.scrollWidth,
    h2: [...document.querySelectorAll("h2")].map((e) => e.textContent),
    totals: box(document.getElementById("totals")),
    over: [...document.querySelectorAll("tr.over")].map(box),
    tables: [...document.querySelectorAll("table")].filter((e) => e.offsetParent).map(box),
    svgs: [...document.querySelectorAll("svg")].map(box),
  };
  const out = document.createElement("pre"); out.id = "layout"; out.textContent = JSON.stringify(facts);
  document.body.appendChild(out);
});
</script>"""


def _run(chromium: str, tmp_path: Path, width: int, *args: str) -> subprocess.CompletedProcess[str]:
    # a home of its own: Chromium writes crash-report settings and dconf under $HOME whatever its profile
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    flags = [f for f in CHROMIUM_FLAGS if not f.startswith("--window-size")]
    done = subprocess.run(
        [chromium, *flags, f"--window-size={width},{SCREEN_H}", f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **home},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _layout(chromium: str, tmp_path: Path, page: Path, width: int) -> dict[str, Any]:
    probe = tmp_path / f"layout-{width}.html"
    probe.write_text(page.read_text().replace("</body>", f"{_LAYOUT}</body>"))
    done = _run(chromium, tmp_path, width, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="layout">(.*?)</pre>', done.stdout, re.S)
    assert found, "the layout script wrote nothing"
    return dict(json.loads(unescape(found.group(1))))


def _rows(png: bytes) -> list[bytes]:
    """The RGB(A) scanlines of a PNG (8 bits per channel, as Chromium writes), unfiltered."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    data, at, width, kind = b"", 8, 0, 0
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        chunk = png[at + 8 : at + 8 + length]
        if png[at + 4 : at + 8] == b"IHDR":
            width, _height, depth, kind = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and kind in (2, 6), (depth, kind)
        elif png[at + 4 : at + 8] == b"IDAT":
            data += chunk
        at += 12 + length
    raw, bpp = zlib.decompress(data), 3 if kind == 2 else 4
    stride, rows, previous = width * bpp, [], bytes(width * bpp)
    for y in range(len(raw) // (stride + 1)):
        kind_of, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind_of == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind_of == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind_of == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind_of == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line) if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3))
        previous = bytes(line)
    return rows


def _rows_with(rows: list[bytes], colour: tuple[int, int, int], at_least: int = 200) -> list[int]:
    """The rows of the screenshot with at least ``at_least`` pixels of ``colour``."""
    pixel = bytes(colour)
    return [y for y, row in enumerate(rows) if sum(row[i : i + 3] == pixel for i in range(0, len(row), 3)) >= at_least]


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 1920])
def test_the_first_screen_in_a_real_browser(demo: Path, tmp_path: Path, width: int) -> None:  # noqa: F811
    chromium = _chromium()
    page = demo / "report" / "index.html"
    facts = _layout(chromium, tmp_path, page, width)
    assert facts["width"] == width
    assert facts["scrollWidth"] <= width, "the page scrolls sideways"
    assert facts["h2"][:3] == ["Usage against awards per project", "Per VO", "Per site"]
    # the totals and the over-award project on the first screen, nothing wider than the window
    assert 0 < facts["totals"][1] < facts["totals"][3] < SCREEN_H / 3
    assert len(facts["over"]) == 1 and facts["over"][0][3] <= SCREEN_H  # CMS_Production: 709.4 of 600 core-hours
    wide = [b for b in facts["tables"] + facts["svgs"] if b[2] > width]
    assert not wide, wide
    shot = tmp_path / f"first-{width}.png"
    done = _run(chromium, tmp_path, width, f"--screenshot={shot}", page.as_uri())
    assert [line for line in done.stderr.splitlines() if ":CONSOLE" in line] == []
    rows = _rows(shot.read_bytes())
    assert len(rows) == SCREEN_H and len(rows[0]) == 3 * width
    totals, over = _rows_with(rows, TOTALS_BG), _rows_with(rows, OVER_BG)
    assert totals and over and max(totals) < min(over), "the totals, then the over-award row, on the first screen"
