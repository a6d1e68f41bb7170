"""``tenure jobs submit``'s input beside the command line: the ``--from-file`` JSONL (one
job per line, every line checked before any job is submitted), its batches, and the
``--header NAME=VALUE`` options (issue #20)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO, Any

import click

from .._validate import MAX_BATCH
from ..errors import InvalidArgument

__all__ = ["FileSubmission", "batches", "parse_headers", "read_submissions", "refuse_constant"]


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass(frozen=True)
class FileSubmission:
    line: int  # in the --from-file file (0: the command line)
    job_id: str
    payload: Any
    queue: str
    delay: float
    max_attempts: int
    # Issue #18: checked by the store (its errors name the line, see tenure.cli._jobs).
    priority: Any = 0
    timeout: Any = None
    unique_key: Any = None  # issue #18; checked by the store (jobs[i].unique_key)
    unique_for: Any = None
    headers: Any = None  # issue #20; checked by the store (jobs[i].headers)


_LINE_KEYS = {
    "job_id",
    "payload",
    "queue",
    "delay",
    "max_attempts",
    "priority",
    "timeout",
    "unique_key",
    "unique_for",
    "headers",
}


def read_submissions(
    stream: IO[str],
    name: str,
    queue: str,
    delay: float,
    max_attempts: int,
    priority: int = 0,
    timeout: float | None = None,
    headers: dict[str, str] | None = None,
) -> list[FileSubmission]:
    """``--from-file``: one JSON object per line (blank lines skipped), every line checked
    before any job is submitted; the options are the defaults of each line."""
    found: list[FileSubmission] = []
    for number, text in enumerate(stream, start=1):
        if not text.strip():
            continue
        where = f"{name} line {number}"
        try:
            line = json.loads(text, parse_constant=refuse_constant)
        except ValueError as exc:
            raise InvalidArgument("--from-file", f"{where}: not JSON: {exc}") from None
        if not isinstance(line, dict):
            raise InvalidArgument(
                "--from-file", f'{where}: must be a JSON object like {{"job_id": "a"}}'
            )
        unknown = sorted(set(line) - _LINE_KEYS)
        if unknown:
            known = ", ".join(sorted(_LINE_KEYS))
            raise InvalidArgument(
                "--from-file", f"{where}: unknown key(s) {', '.join(unknown)} (known: {known})"
            )
        job_id = line.get("job_id")
        if not isinstance(job_id, str):
            raise InvalidArgument("--from-file", f"{where}: job_id must be a string")
        line_delay = line.get("delay", delay)
        line_attempts = line.get("max_attempts", max_attempts)
        if isinstance(line_delay, bool) or not isinstance(line_delay, (int, float)):
            raise InvalidArgument("--from-file", f"{where}: delay must be a number of seconds")
        if isinstance(line_attempts, bool) or not isinstance(line_attempts, int):
            raise InvalidArgument("--from-file", f"{where}: max_attempts must be an integer")
        line_queue = line.get("queue", queue)
        if not isinstance(line_queue, str):
            raise InvalidArgument("--from-file", f"{where}: queue must be a string")
        found.append(
            FileSubmission(
                number,
                job_id,
                line.get("payload"),
                line_queue,
                line_delay,
                line_attempts,
                line.get("priority", priority),
                line.get("timeout", timeout),
                line.get("unique_key"),
                line.get("unique_for"),
                line.get("headers", headers),
            )
        )
    return found


def parse_headers(
    _context: click.Context, _param: click.Parameter, given: tuple[str, ...]
) -> dict[str, str] | None:
    """``--header NAME=VALUE``, repeated: the job's headers (issue #20; None: none)."""
    headers: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgument(
                "--header", f"must be NAME=VALUE (e.g. tenant=acme), got {item!r}"
            )
        headers[name] = value
    return headers or None


def batches(wanted: list[FileSubmission]) -> list[list[FileSubmission]]:
    batches: list[list[FileSubmission]] = [[]]
    seen: set[str] = set()
    for item in wanted:
        if item.job_id in seen or len(batches[-1]) == MAX_BATCH:
            batches.append([])
            seen = set()
        seen.add(item.job_id)
        batches[-1].append(item)
    return [batch for batch in batches if batch]
