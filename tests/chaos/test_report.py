"""The report: self-contained HTML, opened in headless Chromium to prove it renders."""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenure.chaos import check_history, write_report
from tenure.chaos._report import WIDTH, chromium, render, run_origin
from tenure.cli import main
from tests.chaos._chromium import require_chromium
from tests.chaos._histories import T0, A, B, clean


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of an 8-bit PNG (no Pillow needed)."""
    width, height, _channels, data = _png(path)
    return width, height, data


def _png(path: Path) -> tuple[int, int, int, bytes]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
            assert body[8] == 8, "not 8 bits per channel"
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[body[9]]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, channels, zlib.decompress(idat)


def _png_rows(path: Path) -> tuple[int, list[bytes]]:
    """The unfiltered pixel rows of an 8-bit PNG, and its bytes per pixel."""
    width, height, bpp, data = _png(path)
    stride = width * bpp
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = data[start], bytearray(data[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = previous[i]
            c = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return bpp, rows


def _blank(row: bytes, bpp: int) -> bool:
    """Whether a row is all white (the alpha channel, if any, ignored)."""
    return all(row[i] >= 0xF8 for i in range(len(row)) if bpp < 4 or i % 4 != 3)


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


def test_the_time_axis_starts_where_the_schedule_does() -> None:
    """A fault scheduled 0.599 s after the nemesis started is drawn at 0.599 s, not at 0."""
    h = clean()
    h.events.append({"seq": 999, "proc": "nemesis", "pid": 1, "type": "event",
                     "f": "nemesis-start", "t": T0 + 1.0})  # fmt: skip
    origin = run_origin(h.events)
    assert origin == T0 + 1.0
    page = render(check_history(h.events), origin)
    # clean() puts its pause-handler fault at T0 + 1.6: 0.6 s into the schedule.
    assert "pause-handler w1.1 at 0.600 s" in page
    # The axis has a tick at the schedule's zero.
    assert ">0 s</text>" in page


def _lease_rects(page: str) -> list[tuple[float, float]]:
    return [
        (float(x), float(w))
        for x, w in re.findall(r'class="lease" x="([\d.]+)" y="\d+" width="([\d.]+)"', page)
    ]


def test_every_job_row_shares_one_time_axis() -> None:
    h = clean()
    long_id = "chaos-123456-98765-4321098-00042-and-a-long-suffix"
    h.submit(long_id)
    h.claim("w2.1", B, long_id, 1, at=9.0)  # expires at 11.0
    h.claim("w1.1", A, long_id, 2, at=12.0)
    h.holder("complete", "w1.1", A, long_id, 2, at=13.0)
    h.final(long_id, "done", 2)
    page = render(check_history(h.events))
    # j1's leases start at 1.0 and 4.0 s, the long job's at 9.0 and 12.0 s: on one axis
    # the pixel distance is proportional to the time distance, whatever row they are in.
    starts = sorted(x for x, _ in _lease_rects(page))
    assert len(starts) == 4
    per_second = (starts[3] - starts[0]) / 11.0
    assert per_second > 0
    assert starts[1] == pytest.approx(starts[0] + 3.0 * per_second, abs=0.2)
    assert starts[2] == pytest.approx(starts[0] + 8.0 * per_second, abs=0.2)
    # Job ids are not cut: the whole id is the label.
    assert f">{long_id}</text>" in page
    assert "…" not in page.split("<svg", 1)[1]


def test_the_legend_explains_the_shaded_bands() -> None:
    page = render(check_history(clean().events))
    assert 'class="fault-behind"' in page
    assert "shaded band behind a job: a fault that could have touched it" in page


def test_tenure_chromium_none_hides_the_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENURE_CHROMIUM", "none")
    assert chromium() is None
    monkeypatch.setenv("TENURE_CHROMIUM", "/nonexistent/chromium")
    assert chromium() is None
    monkeypatch.setenv("TENURE_CHROMIUM", "sh")  # any command on PATH is taken as named
    assert (chromium() or "").endswith("/sh")


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    require_chromium()
    verdict = check_history(clean().events)
    page, png = write_report(verdict, tmp_path / "report.html")
    assert page.exists()
    assert png is not None, "chromium did not produce a screenshot"
    width, height, pixels = _png_pixels(png)
    assert width == WIDTH + 40
    assert height >= 400
    # Not blank: a rendered page has many distinct byte values (text, colours, lines).
    assert len(set(pixels)) > 50
    white = pixels.count(b"\xff" * 3)
    assert white * 3 < len(pixels) * 0.999
    # Sized to the page: the picture ends in white (nothing cut off at the bottom), and the
    # page's last line (the counts table) is close above that margin.
    bpp, rows = _png_rows(png)
    assert all(_blank(row, bpp) for row in rows[-12:]), "the page is cut off at the bottom"
    assert not all(_blank(row, bpp) for row in rows[-80:]), "white space below the page"


def _history_file(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in clean().events), encoding="utf-8")
    return path


def test_check_says_in_one_line_why_there_is_no_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = _history_file(tmp_path)
    monkeypatch.delenv("TENURE_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without any browser
    done = CliRunner().invoke(main, ["check", str(history)])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert not any(line.startswith("png: ") for line in lines)
    (why,) = [line for line in lines if line.startswith("no png: ")]
    assert why.startswith("no png: Chromium is not installed; install Chromium")
    assert "apt-get install chromium" in why
    assert "--chromium PATH" in why
    assert lines[-2].startswith("verdict: VALID")
    # A browser named but not there is named back.
    done = CliRunner().invoke(main, ["check", str(history), "--chromium", "/no/such/chrome"])
    assert "no png: '/no/such/chrome' was not found;" in done.output
    # --json carries the same reason; --no-png asked for no picture, so says nothing.
    done = CliRunner().invoke(main, ["--json", "check", str(history)])
    assert json.loads(done.output)["no_png"].startswith("no png: Chromium is not installed")
    done = CliRunner().invoke(main, ["check", str(history), "--no-png"])
    assert "png" not in done.output


def test_no_png_help_names_chromium() -> None:
    for command in ("chaos", "check"):
        done = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
        assert "headless Chromium" in done.output
        assert "--chromium PATH" in done.output
