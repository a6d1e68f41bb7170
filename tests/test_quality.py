"""The code-quality gates run as tests, so the README's one test command checks them too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_generated_sync_code_is_current() -> None:
    done = subprocess.run(
        [sys.executable, "tools/async_to_sync.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("ruff", "check", "."),
        ("ruff", "format", "--check", "."),
        ("mypy",),
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_quality_gate(command: tuple[str, ...]) -> None:
    done = run(*command)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
