"""The history of a chaos run: one JSON object per line, Jepsen style.

Every process of a run (workers, storm claimers, the nemesis, the harness) appends to a file
of its own; the harness merges them into ``history.jsonl`` at the end. Each line has::

    seq     per-process sequence number (1, 2, ...)
    t       host wall time of the record (seconds since the epoch; a worker run under
            faketime corrects its own offset), for the timeline only: invariants are
            checked on store time
    proc    the process: "w3.2" (worker 3, second incarnation), "storm-1", "nemesis",
            "harness"
    pid     its operating-system process id
    type    "invoke", then one of "ok" / "fail" / "unknown" for the same "op"; or "event"
    op      the operation's id ("w3.2/17"), shared by its invoke and its completion
    f       what: submit, claim, claim_next, renew, complete, release, fail (store
            operations, recorded at the driver, so every retry is its own operation),
            write (an effect sent to the fenced sink), and for events: fault, calibrate,
            final (a job's state after the run), sink-record / sink-rejection (the sink's
            own ledger, read after the run), config

Store operations carry ``job``, ``gen`` (the generation the caller holds), ``owner``, and on
completion ``store_now`` (the store's clock during the operation), ``status`` (the driver's
``applied`` / ``missed`` / ``missing`` / ``buried``) and the job's row as the store answered
(``row_gen``, ``row_owner``, ``row_state``, ``lease_until``, ``attempts``). ``claim_next``
completions list their claims under ``claims``. Writes carry ``key`` (the effect key) and,
when accepted, ``record`` (the sink's record id: its acceptance order).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["Event", "Recorder", "merge_histories", "read_history"]

Event = dict[str, Any]


class Recorder:
    """Appends one process's history events to a file; thread-safe, crash-tolerant (one
    ``write`` per line on an ``O_APPEND`` descriptor, so a SIGKILL loses at most the line
    being written)."""

    def __init__(self, path: str | Path, proc: str, *, time_offset: float = 0.0) -> None:
        self.path = Path(path)
        self.proc = proc
        self.pid = os.getpid()
        self._offset = time_offset
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._ops = itertools.count(1)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def now(self) -> float:
        return time.time() - self._offset

    def write(self, event: Event) -> None:
        with self._lock:
            if self._fd is None:
                return
            line = {
                "seq": next(self._seq),
                "t": round(self.now(), 6),
                "proc": self.proc,
                "pid": self.pid,
                **event,
            }
            data = (json.dumps(line, separators=(",", ":"), default=str) + "\n").encode()
            with contextlib.suppress(OSError):
                os.write(self._fd, data)

    def invoke(self, f: str, **fields: Any) -> str:
        """Record the start of an operation; returns its id for `end`."""
        op = f"{self.proc}/{next(self._ops)}"
        self.write({"type": "invoke", "op": op, "f": f, **fields})
        return op

    def end(self, op: str, f: str, outcome: str, **fields: Any) -> None:
        """Record how operation ``op`` ended: ``outcome`` is ``ok``, ``fail`` or ``unknown``."""
        self.write({"type": outcome, "op": op, "f": f, **fields})

    def event(self, f: str, **fields: Any) -> None:
        self.write({"type": "event", "f": f, **fields})


def read_history(path: str | Path) -> Iterator[Event]:
    """The events of a history file; a line cut short by a crash is skipped."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event


def merge_histories(files: Iterable[Path], out: Path) -> int:
    """Merge per-process history files into one, ordered by host time; returns the count."""
    events: list[Event] = []
    for path in files:
        events.extend(read_history(path))
    events.sort(key=lambda e: (e.get("t", 0.0), str(e.get("proc", "")), e.get("seq", 0)))
    with open(out, "w", encoding="utf-8") as sink:
        for event in events:
            sink.write(json.dumps(event, separators=(",", ":"), default=str) + "\n")
    return len(events)
