"""Fixtures of the CLI tests: the CLI run in-process (CliRunner) against the suite's
``url``, whose store is SQLite unless a test is parametrized over every backend."""

from __future__ import annotations

import os
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tenure.cli import main
from tests.backends import SQLITE, Backend


@pytest.fixture
def backend() -> Backend:
    """The CLI's store is SQLite (``url``, the suite's, is then a fresh file), except in the
    tests parametrized over every backend."""
    return SQLITE


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, url: str) -> Any:
    """Run the CLI in-process with a clean TENURE_* environment pointing at ``url``."""
    for name in list(os.environ):
        if name.startswith("TENURE_"):
            monkeypatch.delenv(name)
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
        environment = {"TENURE_STORE_URL": url, **(env or {})}
        return runner.invoke(main, list(args), env=environment, input=stdin)

    invoke.url = url  # type: ignore[attr-defined]
    return invoke
