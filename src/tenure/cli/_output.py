"""Rendering for the CLI: JSON for scripts, tables for people.

``--json`` (or ``TENURE_JSON=1``) prints one JSON document on stdout. Otherwise output is a
table: drawn with `rich` when stdout is a terminal and rich is installed, plain aligned text
when it is not (pipes, files, tests), so the human form is also stable enough to grep.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import click

from ..models import Job, JobState

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "Cell",
    "format_duration",
    "format_time",
    "format_value",
    "job_when",
    "Output",
    "relative",
]

# Cell styles a caller may ask for; plain output ignores them.
STYLES = ("good", "bad", "warn", "dim", "bold")
_RICH_STYLES = {"good": "green", "bad": "bold red", "warn": "yellow", "dim": "dim", "bold": "bold"}


def _rich_wanted() -> bool:
    stream = sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and importlib.util.find_spec("rich") is not None


@dataclass
class Cell:
    """A table cell with an optional style (one of `STYLES`)."""

    text: str
    style: str | None = None


@dataclass
class Output:
    """Where a command's results go. ``rich`` is decided once, from stdout and the import."""

    json_mode: bool = False
    rich: bool = field(default_factory=_rich_wanted)
    console: Console | None = None

    def __post_init__(self) -> None:
        if self.json_mode:
            self.rich = False
        if self.rich and self.console is None:
            from rich.console import Console

            self.console = Console(highlight=False)

    # -- JSON ------------------------------------------------------------------------

    def json(self, value: Any) -> None:
        click.echo(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False))

    # -- text ------------------------------------------------------------------------

    def line(self, text: str = "", style: str | None = None) -> None:
        if self.console is not None:
            from rich.text import Text

            self.console.print(Text(text, style=_RICH_STYLES.get(style or "", "")))
        else:
            click.echo(text)

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str | Cell]],
        *,
        title: str | None = None,
    ) -> None:
        if self.console is not None:
            self._rich_table(headers, rows, title)
            return
        if title:
            click.echo(title)
        cells = [[h.upper() for h in headers]] + [
            [c.text if isinstance(c, Cell) else c for c in row] for row in rows
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
        indent = "  " if title else ""
        for row in cells:
            text = "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True))
            click.echo(indent + text.rstrip())

    def _rich_table(
        self, headers: Sequence[str], rows: Sequence[Sequence[str | Cell]], title: str | None
    ) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        assert self.console is not None
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
        for header in headers:
            table.add_column(header)
        for row in rows:
            table.add_row(
                *(
                    Text(c.text, style=_RICH_STYLES.get(c.style or "", ""))
                    if isinstance(c, Cell)
                    else Text(c)
                    for c in row
                )
            )
        self.console.print(table)

    def fields(self, pairs: Sequence[tuple[str, str | Cell]], *, title: str | None = None) -> None:
        """A two-column listing: name, value."""
        if self.console is not None:
            self._rich_fields(pairs, title)
            return
        if title:
            click.echo(title)
        width = max((len(name) for name, _ in pairs), default=0)
        indent = "  " if title else ""
        for name, value in pairs:
            text = value.text if isinstance(value, Cell) else value
            click.echo(f"{indent}{name.ljust(width)}  {text}".rstrip())

    def _rich_fields(self, pairs: Sequence[tuple[str, str | Cell]], title: str | None) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        assert self.console is not None
        table = Table(
            title=title, title_justify="left", title_style="bold", box=box.SIMPLE, show_header=False
        )
        table.add_column(style="bold")
        table.add_column()
        for name, value in pairs:
            if isinstance(value, Cell):
                table.add_row(name, Text(value.text, style=_RICH_STYLES.get(value.style or "", "")))
            else:
                table.add_row(name, Text(value))
        self.console.print(table)


# -- formatting helpers -------------------------------------------------------------------


def format_time(seconds: float | None) -> str:
    """Store time as ISO 8601 UTC with milliseconds, e.g. ``2026-05-09T07:35:25.123Z``."""
    if seconds is None:
        return "-"
    moment = datetime.fromtimestamp(seconds, timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_duration(seconds: float) -> str:
    """``45s``, ``2m05s``, ``3h10m``, ``4d02h``: short and exact enough for a table."""
    seconds = abs(seconds)
    if seconds < 10:
        return f"{seconds:.1f}s".replace(".0s", "s")
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def relative(moment: float, now: float) -> str:
    """``in 12s``, ``3s ago`` or ``now``, relative to store time ``now``."""
    delta = moment - now
    if abs(delta) < 0.05:
        return "now"
    return f"in {format_duration(delta)}" if delta > 0 else f"{format_duration(delta)} ago"


def format_value(value: Any) -> str:
    """A payload or result as compact JSON on one line (``-`` when absent)."""
    if value is None:
        return "-"
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def job_when(job: Job) -> str:
    """When the job next matters, in words, relative to store time (``due in 10m00s``)."""
    if job.state == JobState.READY:
        due = relative(job.available_at, job.as_of)
        return "due now" if job.available_at <= job.as_of else f"due {due}"
    if job.state == JobState.LEASED and job.lease_until is not None:
        if job.lease_expired:
            return f"lease ended {relative(job.lease_until, job.as_of)}, claimable"
        return f"lease ends {relative(job.lease_until, job.as_of)}"
    return f"{job.state} {relative(job.updated_at, job.as_of)}"
