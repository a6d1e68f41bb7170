"""`tenure.chaos` hands out its names on first use: a chaos worker or storm process imports
`tenure.chaos._proc` (the package runs first) and must not pay for the harness, the checker
and the report; a user's ``from tenure.chaos import run_chaos`` gets the same objects as
before."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import tenure.chaos


def test_every_public_name_is_the_one_its_module_defines() -> None:
    where = tenure.chaos._WHERE
    assert set(where) == set(tenure.chaos.__all__)
    for name, module in where.items():
        defined = getattr(importlib.import_module(f"tenure.chaos.{module}"), name)
        assert getattr(tenure.chaos, name) is defined, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'run_chaoss'"):
        tenure.chaos.run_chaoss  # noqa: B018


def test_a_chaos_process_does_not_import_the_harness_checker_or_report() -> None:
    code = (
        "import sys, tenure.chaos._proc\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('tenure.chaos.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "tenure.chaos._proc" in loaded
    assert loaded.isdisjoint(
        {"tenure.chaos._harness", "tenure.chaos._checker", "tenure.chaos._report"}
    ), loaded
