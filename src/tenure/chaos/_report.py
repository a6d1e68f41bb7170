"""The report of a chaos run: one self-contained HTML page (inline SVG and CSS, nothing
fetched from a network) and a PNG of it taken with headless Chromium when it is installed.

Per job, a timeline of ownership intervals in store time, coloured by generation, with the
stale attempts marked where they were rejected (by the store: a red cross; by the sink: an
orange diamond), writes the sink accepted (small ticks), writes a worker withheld itself
(grey circles), the moments a worker was stopped holding the job (pause bars), and the
accepted cancels (⊘) and requeues (⟲) of the cancel fault. Above, the
faults on the same time axis, one lane per kind; every row shares that axis, whose zero is
the start of the fault schedule (``schedule.json``'s ``at``) when the history records it.
Jobs with violations come first, then the jobs where faults bit; the rest are counted, not
drawn.

The browser is found on ``PATH`` (``chromium``, ``chromium-browser``, ``google-chrome``,
``chrome``) unless ``TENURE_CHROMIUM`` names one (a path or a command), or is ``none``: no
screenshot, as if none were installed.
"""

from __future__ import annotations

import html
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ._history import Event
from ._verdict import Interval, Mark, Verdict

__all__ = ["CHROMIUM_HINT", "chromium", "run_origin", "screenshot", "write_report"]

Scale = Callable[[float], float]

MAX_ROWS = 60
WIDTH = 1360
LABEL = 190  # the least width of the label column; it grows to fit the longest job id
LABEL_CHAR = 6.6  # pixels per character of an 11 px sans-serif label (a little generous)
MAX_LABEL_CHARS = 60  # longer job ids are cut in the middle (the title keeps them whole)
ROW = 22
LANE = 16
FAULT_COLORS = {
    "pause": "#8e44ad",
    "pause-handler": "#9b59b6",
    "pause-renew": "#a569bd",
    "pause-complete": "#7d3c98",
    "storm": "#d35400",
    "skew": "#16a085",
    "faketime": "#1abc9c",
    "kill": "#c0392b",
    "proxy-delay": "#2980b9",
    "proxy-drop": "#1f618d",
    "store-pause": "#7f8c8d",
    "store-restart": "#566573",
    "store-kill": "#17202a",
    "failover": "#6c3483",
    "cancel": "#b03a2e",
}


def _gen_color(gen: int) -> str:
    return f"hsl({(gen * 67) % 360}, 65%, 55%)"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _pick_jobs(verdict: Verdict) -> tuple[list[str], int]:
    bad = {v.job for v in verdict.violations if v.job}
    score: dict[str, float] = {}
    for job, intervals in verdict.intervals.items():
        marks = verdict.marks.get(job, [])
        stale = sum(1 for m in marks if m.kind.startswith(("rejected", "write-stale", "reexec")))
        score[job] = (1000 if job in bad else 0) + 10 * stale + len(intervals)
    for job in bad:
        score.setdefault(job, 1000)
    ranked = sorted(score, key=lambda j: (-score[j], j))
    interesting = [j for j in ranked if score[j] > 1]
    chosen = (interesting or ranked)[:MAX_ROWS]
    return sorted(chosen, key=lambda j: (-(j in bad), j)), len(score) - len(chosen)


def _axis(verdict: Verdict, jobs: list[str], origin: float | None) -> tuple[float, float]:
    """The store-time span the picture covers: every fault, every drawn job, the origin."""
    times: list[float] = [] if origin is None else [origin]
    for job in jobs:
        for i in verdict.intervals.get(job, []):
            times += [i.start, i.end]
        times += [m.at for m in verdict.marks.get(job, [])]
    for span in verdict.fault_spans:
        times.append(span["start"] + verdict.offset)
        if span["end"] is not None:
            times.append(span["end"] + verdict.offset)
    if not times:
        return 0.0, 1.0
    low, high = min(times), max(times)
    return low, max(high, low + 1.0)


def run_origin(events: Iterable[Event]) -> float | None:
    """Host time at which the nemesis started (the zero of the schedule), if recorded."""
    starts = [float(e["t"]) for e in events if e.get("f") == "nemesis-start" and "t" in e]
    return min(starts) if starts else None


def _label(job: str) -> str:
    if len(job) <= MAX_LABEL_CHARS:
        return job
    half = (MAX_LABEL_CHARS - 1) // 2
    return f"{job[:half]}…{job[-half:]}"


STORE_WIDE = (
    "store-pause",
    "store-restart",
    "store-kill",
    "failover",
    "proxy-delay",
    "proxy-drop",
)


def _spans(verdict: Verdict) -> list[tuple[float, float, dict[str, Any]]]:
    """Fault spans on the store's time axis: (start, end, span)."""
    found = []
    for span in verdict.fault_spans:
        start = span["start"] + verdict.offset
        end = (span["end"] + verdict.offset) if span["end"] is not None else start
        found.append((start, end, span))
    return found


def _relevant(span: dict[str, Any], job: str, procs: set[str]) -> bool:
    """Whether a fault could have touched ``job``: it hit one of the job's holders, the
    whole store, or (a claim storm) the job itself."""
    if span["kind"] in STORE_WIDE:
        return True
    if span["kind"] == "storm":
        return job in (span.get("detail", {}).get("jobs") or ())
    if span["kind"] == "cancel":
        return job in (span.get("detail", {}).get("cancelled") or ())
    return str(span.get("target")) in procs


def _svg(verdict: Verdict, jobs: list[str], origin: float | None = None) -> str:
    """The fault lanes, then one row per job, all on one time axis (seconds from the start
    of the fault schedule), with the faults that touched each job shaded behind it.

    ``origin`` is the host time of the schedule's zero (`run_origin`); without it the axis
    starts at the first thing drawn."""
    t0, t1 = _axis(verdict, jobs, None if origin is None else origin + verdict.offset)
    zero = t0 if origin is None else origin + verdict.offset
    labels = {job: _label(job) for job in jobs}
    longest_label = max((len(text) for text in labels.values()), default=0)
    label_width = max(LABEL, round(longest_label * LABEL_CHAR) + 16)
    plot = WIDTH - label_width - 20
    spans = _spans(verdict)

    def x(t: float) -> float:
        return label_width + (t - t0) / (t1 - t0) * plot

    kinds = sorted({s["kind"] for s in verdict.fault_spans})
    top = 30
    lanes_bottom = top + LANE * len(kinds)
    y0 = lanes_bottom + 30
    height = y0 + ROW * len(jobs) + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">'
    ]
    parts += _ticks(x, t0, t1, zero, top, height)
    parts += _lanes(kinds, spans, x, zero, top, label_width)
    parts.append(
        f'<text x="6" y="{y0 - 10}" font-weight="bold">jobs, on the same time axis; shaded '
        "behind a job: the faults that could have touched it (colour of their lane)</text>"
    )
    bad = {v.job for v in verdict.violations if v.job}
    for row, job in enumerate(jobs):
        y = y0 + row * ROW
        parts.append(
            f'<text x="{label_width - 6}" y="{y + 14}" text-anchor="end" '
            f'fill="{"#c0392b" if job in bad else "#222"}"><title>{_e(job)}</title>'
            f"{_e(labels[job])}</text>"
        )
        parts += _job_row(verdict, job, spans, x, y)
    parts.append("</svg>")
    return "".join(parts)


def _ticks(x: Scale, t0: float, t1: float, zero: float, top: int, height: int) -> list[str]:
    """Ticks at whole steps from the schedule's zero, drawn through the lanes and the rows."""
    step = _tick_step(t1 - t0)
    first = math.ceil((t0 - zero) / step - 1e-9)
    last = math.floor((t1 - zero) / step + 1e-9)
    parts = []
    for k in range(first, last + 1):
        px = x(zero + k * step)
        parts.append(
            f'<line x1="{px:.1f}" y1="{top - 8}" x2="{px:.1f}" y2="{height - 14}" '
            'stroke="#e5e5e5"/>'
            f'<text x="{px:.1f}" y="{top - 12}" text-anchor="middle" fill="#666">'
            f"{k * step:g} s</text>"
        )
    return parts


def _lanes(
    kinds: list[str],
    spans: list[tuple[float, float, dict[str, Any]]],
    x: Scale,
    zero: float,
    top: int,
    label_width: int,
) -> list[str]:
    """One lane per fault kind, each fault a bar."""
    parts = []
    for lane, kind in enumerate(kinds):
        y = top + lane * LANE
        color = FAULT_COLORS.get(kind, "#555")
        parts.append(
            f'<text x="{label_width - 6}" y="{y + 11}" text-anchor="end" fill="{color}">'
            f"{_e(kind)}</text>"
        )
        for start, end, span in spans:
            if span["kind"] != kind:
                continue
            width = max(3.0, x(end) - x(start))
            title = (
                f"{kind} {span.get('target') or ''} at {start - zero:.3f} s "
                f"{span.get('detail', {})}"
            )
            parts.append(
                f'<rect class="fault" x="{x(start):.1f}" y="{y + 2}" width="{width:.1f}" '
                f'height="{LANE - 4}" fill="{color}" opacity="0.8"><title>{_e(title)}</title>'
                "</rect>"
            )
    return parts


def _job_row(
    verdict: Verdict,
    job: str,
    spans: list[tuple[float, float, dict[str, Any]]],
    x: Scale,
    y: int,
) -> list[str]:
    """A job's row: the faults that could have touched it, its intervals and marks."""
    parts = []
    procs = {i.proc for i in verdict.intervals.get(job, [])}
    procs |= {m.proc for m in verdict.marks.get(job, [])}
    for start, end, span in spans:
        if not _relevant(span, job, procs):
            continue
        left, right = x(start), x(max(end, start))
        color = FAULT_COLORS.get(span["kind"], "#555")
        title = f"{span['kind']} {span.get('target') or ''} {span.get('detail', {})}"
        parts.append(
            f'<rect class="fault-behind" x="{left:.1f}" y="{y + 1}" '
            f'width="{max(2.0, right - left):.1f}" height="{ROW - 2}" fill="{color}" '
            f'opacity="0.18"><title>{_e(title)}</title></rect>'
        )
    for interval in verdict.intervals.get(job, []):
        parts.append(_interval(interval, x, y))
    for mark in verdict.marks.get(job, []):
        parts.append(_mark(mark, x, y))
    return parts


def _tick_step(span: float) -> float:
    for step in (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600):
        if span / step <= 14:
            return float(step)
    return 7200.0


def _interval(interval: Interval, x: Scale, y: int) -> str:
    start, end = x(interval.start), x(max(interval.end, interval.start))
    color = _gen_color(interval.gen)
    title = (
        f"generation {interval.gen} held by {interval.owner} ({interval.proc}) from "
        f"{interval.start:.3f} to {interval.end:.3f} (store time)"
        + (f", ended by {interval.ended_by}" if interval.ended_by else ", expired")
    )
    text = ""
    if end - start > 16:
        text = (
            f'<text x="{start + 3:.1f}" y="{y + 14}" fill="#fff" font-size="10">'
            f"{interval.gen}</text>"
        )
    return (
        f'<rect class="lease" x="{start:.1f}" y="{y + 3}" width="{max(2.0, end - start):.1f}" '
        f'height="{ROW - 6}" rx="3" fill="{color}"><title>{_e(title)}</title></rect>{text}'
    )


def _mark(mark: Mark, x: Scale, y: int) -> str:
    px = x(mark.at)
    title = _e(f"{mark.kind} gen {mark.gen} by {mark.proc}: {mark.detail}")
    if mark.kind.startswith("rejected"):
        return (
            f'<g class="stale-store"><title>{title}</title>'
            f'<line x1="{px - 5:.1f}" y1="{y + 4}" x2="{px + 5:.1f}" y2="{y + 18}" '
            'stroke="#c0392b" stroke-width="2.5"/>'
            f'<line x1="{px - 5:.1f}" y1="{y + 18}" x2="{px + 5:.1f}" y2="{y + 4}" '
            'stroke="#c0392b" stroke-width="2.5"/></g>'
        )
    if mark.kind == "write-stale":
        return (
            f'<polygon class="stale-sink" points="{px:.1f},{y + 3} {px + 6:.1f},{y + 11} '
            f'{px:.1f},{y + 19} {px - 6:.1f},{y + 11}" fill="#e67e22" stroke="#a04000">'
            f"<title>{title}</title></polygon>"
        )
    if mark.kind == "write-withheld":
        return (
            f'<circle cx="{px:.1f}" cy="{y + 11}" r="4" fill="#bbb" stroke="#555">'
            f"<title>{title}</title></circle>"
        )
    if mark.kind == "reexecuted":
        return (
            f'<text class="reexecuted" x="{px:.1f}" y="{y + 16}" text-anchor="middle" '
            f'font-size="15" font-weight="bold" fill="#1f618d"><title>{title}</title>↻</text>'
        )
    if mark.kind in ("cancelled", "requeued"):
        glyph = "⊘" if mark.kind == "cancelled" else "⟲"
        return (
            f'<text class="{mark.kind}" x="{px:.1f}" y="{y + 16}" text-anchor="middle" '
            f'font-size="14" font-weight="bold" fill="#b03a2e"><title>{title}</title>{glyph}</text>'
        )
    if mark.kind == "pause":
        return (
            f'<g><title>{title}</title><rect x="{px - 4:.1f}" y="{y + 2}" width="3" '
            f'height="18" fill="#6c3483"/><rect x="{px + 1:.1f}" y="{y + 2}" width="3" '
            'height="18" fill="#6c3483"/></g>'
        )
    return (
        f'<line x1="{px:.1f}" y1="{y + 1}" x2="{px:.1f}" y2="{y + 6}" stroke="#222" '
        f'stroke-width="1.5"><title>{title}</title></line>'
    )


def render(verdict: Verdict, origin: float | None = None) -> str:
    """The report page; ``origin``: host time of the fault schedule's zero (`run_origin`)."""
    jobs, hidden = _pick_jobs(verdict)
    status_color = {"VALID": "#1e8449", "INVALID": "#c0392b"}.get(verdict.status, "#b7950b")
    c = verdict.counts
    cells = [
        f"<td>{_e(k.replace('_', ' '))}</td><td>{v}</td>"
        for k, v in sorted(c.items())
        if k != "events"
    ]
    rows = "".join("<tr>" + "".join(cells[i : i + 4]) + "</tr>" for i in range(0, len(cells), 4))
    faults = "".join(
        f'<tr><td><span class="swatch" style="background:{FAULT_COLORS.get(k, "#555")}">'
        f"</span>{_e(k)}</td><td>{n}</td></tr>"
        for k, n in sorted(verdict.faults.items())
    )
    invariants = []
    grouped = verdict.by_invariant()
    for key, name in verdict.shown_invariants().items():
        found = grouped[key]
        state = "ok" if not found else f"violated x{len(found)}"
        items = "".join(f"<li>{_e(v.message)}</li>" for v in found[:200])
        invariants.append(
            f'<div class="inv {"ok" if not found else "bad"}"><b>{key} {name}</b>: {state}'
            + (f"<ul>{items}</ul>" if items else "")
            + "</div>"
        )
    shown = {k: v for k, v in verdict.info.items() if v is not None and k != "limits"}
    if verdict.locks:  # no jobs in a locks run (the option's default is not its shape)
        shown.pop("jobs", None)
    info = ", ".join(f"{k} {v}" for k, v in shown.items())
    if verdict.limits_line() is not None:  # a flow run's limited queues and their peaks
        info += f"; {verdict.limits_line()}"
    legend = (
        '<span class="swatch" style="background:hsl(67,65%,55%)"></span>lease (colour = '
        "generation) &nbsp; "
        '<b style="color:#c0392b">✕</b> stale renew/complete/release/fail rejected by the '
        "store &nbsp; "
        '<b style="color:#e67e22">◆</b> stale write rejected by the sink &nbsp; '
        "│ write accepted &nbsp; ● write withheld by its worker &nbsp; "
        '<b style="color:#6c3483">❚❚</b> worker stopped &nbsp; '
        '<b style="color:#1f618d">↻</b> a lost lease whose handler ran again &nbsp; '
        '<b style="color:#b03a2e">⊘ ⟲</b> cancelled / requeued (cancel fault) &nbsp; '
        '<span class="swatch" style="background:#9b59b6;opacity:0.3"></span>shaded band '
        "behind a job: a fault that could have touched it (its holder paused, killed or "
        "skewed, a claim storm on it, a store-wide fault), in the colour of its lane"
    )
    more = f"<p>{hidden} more jobs not drawn (nothing happened to them).</p>" if hidden else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tenure chaos: {_e(verdict.status)}</title>
<style>
body {{ font-family: sans-serif; margin: 16px; color: #222; background: #fff; }}
h1 {{ font-size: 20px; margin: 0 0 4px 0; }}
.status {{ color: #fff; background: {status_color}; padding: 2px 10px; border-radius: 4px; }}
.grid {{ display: flex; gap: 24px; align-items: flex-start; flex-wrap: wrap; }}
table {{ border-collapse: collapse; font-size: 12px; }}
td {{ padding: 1px 8px; border-bottom: 1px solid #eee; }}
.inv {{ font-size: 12px; margin: 2px 0; }}
.inv.ok b {{ color: #1e8449; }} .inv.bad b {{ color: #c0392b; }}
.swatch {{ display: inline-block; width: 10px; height: 10px; margin-right: 5px; }}
.legend {{ font-size: 12px; margin: 8px 0; }}
</style></head><body>
<h1>tenure chaos <span class="status">{_e(verdict.status)}</span></h1>
<p>{_e(verdict.headline())}</p>
<p style="font-size:12px;color:#555">{_e(info)}</p>
<div class="grid">
<div>{"".join(invariants)}</div>
<table><tr><th colspan="2">faults injected</th></tr>{faults}</table>
</div>
<div class="legend">{legend}</div>
{_svg(verdict, jobs, origin)}
{more}
<table class="counts"><tr><th colspan="4">counts</th></tr>{rows}</table>
</body></html>
"""


CHROMIUM_HINT = (
    "install Chromium (apt-get install chromium, or brew install --cask chromium) or name a "
    "browser with --chromium PATH / TENURE_CHROMIUM"
)
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium(browser: str | None = None) -> str | None:
    """The headless browser to screenshot with: ``browser`` (a path or a command name),
    else ``TENURE_CHROMIUM`` (``none``: no browser), else the first of `_BROWSERS` on
    ``PATH``; None when there is none."""
    named = browser or os.environ.get("TENURE_CHROMIUM", "").strip()
    if named.lower() == "none":
        return None
    if named:
        return shutil.which(named)
    for name in _BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def _headless(browser: str, profile: str, width: int, height: int, *args: str) -> list[str]:
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        *args,
    ]


def _page_height(browser: str, page: Path, profile: str, width: int) -> int | None:
    """The height of ``page`` laid out ``width`` pixels wide, measured by the browser on a
    copy that records it (the report itself has no script)."""
    probe = page.with_name(f".{page.stem}-measure.html")
    script = (
        "<script>document.body.setAttribute('data-height', "
        "Math.ceil(document.documentElement.scrollHeight))</script>"
    )
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"))
    try:
        done = subprocess.run(
            _headless(browser, profile, width, 600, "--dump-dom", probe.resolve().as_uri()),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        probe.unlink(missing_ok=True)
    found = re.search(r'data-height="(\d+)"', done.stdout)
    return int(found.group(1)) if found else None


def screenshot(
    page: Path,
    png: Path,
    *,
    width: int = WIDTH + 40,
    height: int | None = None,
    browser: str | None = None,
) -> bool:
    """Render ``page`` with headless Chromium into ``png``, as tall as the page (measured
    unless ``height`` is given); False when it could not."""
    found = chromium(browser)
    if found is None:
        return False
    with tempfile.TemporaryDirectory(prefix="tenure-chromium-") as profile:
        if height is None:
            height = min(16_000, (_page_height(found, page, profile, width) or 1200) + 16)
        command = _headless(
            found, profile, width, height, f"--screenshot={png}", page.resolve().as_uri()
        )
        try:
            subprocess.run(command, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return png.exists() and png.stat().st_size > 0


def write_report(
    verdict: Verdict,
    path: Path,
    *,
    png: bool = True,
    origin: float | None = None,
    browser: str | None = None,
) -> tuple[Path, Path | None]:
    """Write the HTML report to ``path`` (and ``path`` with ``.png`` when Chromium is
    available and ``png``); returns both paths (the PNG's None when not made).

    ``origin``: host time of the fault schedule's zero (`run_origin` of the history), so
    the time axis matches ``schedule.json``; ``browser``: as in `chromium`."""
    path.write_text(render(verdict, origin), encoding="utf-8")
    if not png:
        return path, None
    image = path.with_suffix(".png")
    image.unlink(missing_ok=True)  # a stale picture of an earlier run must not stand in
    return path, image if screenshot(path, image, browser=browser) else None
