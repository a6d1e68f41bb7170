"""What the dashboard's end-to-end tests share: `tenure dashboard` as a real server
process, and the browser (Playwright driving the system's Chromium, or skip locally with
one line / fail under CI=true, as tests/chaos/_chromium.py does for the report)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from tenure.chaos._report import chromium
from tests.backends import unavailable
from tests.servers import free_port, stop_process

MISSING_BROWSER = "Chromium is not installed (apt-get install chromium, or TENURE_CHROMIUM=PATH)"
MISSING_PLAYWRIGHT = "the playwright package is not installed (pip install -e '.[test]')"


def require_browser() -> str:
    """The Chromium to drive (Playwright's own browsers are never downloaded)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable(MISSING_PLAYWRIGHT)
    found = chromium()
    if found is None:
        unavailable(MISSING_BROWSER)
    assert found is not None
    return found


@dataclass
class Running:
    base: str
    process: subprocess.Popen[str]


@contextmanager
def dashboard_server(url: str, *args: str, env: dict[str, str] | None = None) -> Iterator[Running]:
    """``tenure dashboard --store URL --port <free> ARGS`` in a process of its own, until
    it answers; stopped (SIGTERM) at the end."""
    port = free_port()
    command = [sys.executable, "-m", "tenure", "dashboard", "--store", url, "--port", str(port)]
    process = subprocess.Popen(
        [*command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                raise AssertionError(f"tenure dashboard exited: {process.communicate()[0]}")
            try:
                httpx.get(f"{base}/static/dashboard.css", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise TimeoutError("tenure dashboard did not answer in 20 s") from None
                time.sleep(0.1)
        yield Running(base, process)
    finally:
        stop_process(process)
