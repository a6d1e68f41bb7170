"""Fixtures of the fence tests: real sink processes, PostgreSQL schemas, actor processes
(their helpers are in tests/fence/_sink.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from tests.fence._complete_env import complete_env  # noqa: F401  (fixture: env)
from tests.fence._sink import ROOT, SINK_KEYS, SinkProcess, start_sink, stop


@pytest.fixture(scope="module")
def signed_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SinkProcess]:
    """A real ``tenure sink serve`` process that requires tokens signed with k1 or k2."""
    pytest.importorskip("uvicorn")
    db = tmp_path_factory.mktemp("sink") / "sink.db"
    keys = [arg for spec in SINK_KEYS for arg in ("--key", spec)]
    sink = start_sink(db, *keys)
    yield sink
    stop(sink.proc)


@pytest.fixture
def actors() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `tests.fence._actors` processes; all are stopped at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        # The tests package first, then whatever PYTHONPATH the run has: the actors import
        # the same tenure as this process (another checkout's, under PYTHONPATH=.../src).
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fence._actors", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        stop(proc)
