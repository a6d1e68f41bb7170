"""Helpers of the fence tests: real ``tenure sink serve`` processes and the JSON lines of
the processes the tests start (sinks and actors)."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.servers import stop_process

ROOT = Path(__file__).resolve().parents[2]
SINK_KEYS = ("k2=the-new-key-0123456789abcdef", "k1=worked-example-secret-0123456789")


_READERS: dict[int, queue.Queue[str | None]] = {}


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """A queue fed with ``proc``'s stdout lines by a thread (None at the end): select()
    on a buffered pipe misses lines already read into the buffer."""
    found = _READERS.get(id(proc))
    if found is None:
        found = _READERS[id(proc)] = queue.Queue()
        stdout = proc.stdout
        assert stdout is not None

        def pump(lines: queue.Queue[str | None] = found) -> None:
            try:
                for line in stdout:
                    lines.put(line)
            except ValueError:  # closed at teardown
                pass
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
    return found


def read_line(proc: subprocess.Popen[str], timeout: float = 20.0) -> str:
    """The next stdout line of ``proc``, or fail (with its stderr) after ``timeout``."""
    try:
        line = _lines(proc).get(timeout=timeout)
    except queue.Empty:
        line = None
    if line is None:
        code = proc.poll()
        stderr = proc.stderr.read() if proc.stderr is not None and code is not None else ""
        pytest.fail(f"no line from {proc.args!r} (exit {code}): {stderr[-2000:]}")
    return line


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)  # a stopped process would not hear the SIGTERM
    stop_process(proc)
    _READERS.pop(id(proc), None)


@dataclass
class SinkProcess:
    url: str
    db: Path
    proc: subprocess.Popen[str]
    announcement: dict[str, Any] = field(default_factory=dict)

    def client(self) -> Any:
        import httpx

        return httpx.Client(base_url=self.url, timeout=10)


def start_sink(db: Path, *extra: str) -> SinkProcess:
    command = [sys.executable, "-m", "tenure", "--json", "sink", "serve", "--port", "0"]
    command += ["--db", str(db), *extra]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        announcement = json.loads(read_line(proc))
    except BaseException:
        stop(proc)
        raise
    return SinkProcess(announcement["url"], db, proc, announcement)


def events(proc: subprocess.Popen[str], until: str, timeout: float = 30.0) -> dict[str, Any]:
    """Read ``proc``'s JSON events up to the first ``until`` one; all of them by name."""
    seen: dict[str, Any] = {}
    while until not in seen:
        event = json.loads(read_line(proc, timeout))
        if event["event"] == "error":
            pytest.fail(f"actor failed: {event}")
        seen[event.pop("event")] = event
    return seen
