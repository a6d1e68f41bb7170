"""The report: self-contained HTML, opened in headless Chromium to prove it renders."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

from tenure.chaos import check_history, write_report
from tenure.chaos._report import chromium, render
from tests.backends import unavailable
from tests.chaos._histories import A, clean


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of an 8-bit PNG (no Pillow needed)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_report_is_self_contained() -> None:
    h = clean()
    h.write("w1.1", A, "j1", 1, 3, at=4.8)  # one I4 violation, shown in red
    page = render(check_history(h.events))
    assert page.startswith("<!DOCTYPE html>")
    # Nothing to fetch: no scripts, stylesheets, images or fonts from anywhere.
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert "url(" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]
    # Ownership intervals coloured by generation, stale attempts and faults on the axis.
    assert page.count('class="lease"') == 2  # j1's two generations; j2 is uneventful
    assert "1 more jobs not drawn" in page
    assert 'class="stale-store"' in page
    assert 'class="stale-sink"' in page
    assert 'class="fault"' in page
    assert "I4 destinations</b>: violated x1" in page


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    if chromium() is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    verdict = check_history(clean().events)
    page, png = write_report(verdict, tmp_path / "report.html")
    assert page.exists()
    assert png is not None, "chromium did not produce a screenshot"
    width, height, pixels = _png_pixels(png)
    assert (width, height) >= (1000, 400)
    # Not blank: a rendered page has many distinct byte values (text, colours, lines).
    assert len(set(pixels)) > 50
    white = pixels.count(b"\xff" * 3)
    assert white * 3 < len(pixels) * 0.999
