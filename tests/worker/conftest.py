"""Fixtures of the worker tests. The store fixtures (``backend``, ``url``, ``clock``,
``store``, ``real_store``, ...) are the suite's, from tests/conftest.py: every test that uses
them runs once per backend. The helpers (``wait_until``, ``running``, ``run_burst``) live in
tests/worker/_support.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import tenure


@pytest.fixture
def make_worker(url: str, clock: tenure.ManualClock) -> Callable[..., tenure.Worker]:
    """A Worker on the test's store and manual clock (override anything by keyword)."""

    def make(**options: Any) -> tenure.Worker:
        settings: dict[str, Any] = {
            "clock": clock,
            "store_clock": clock,
            "ttl": 10.0,
            "poll_interval": 0.02,
            "grace": 5.0,
            **options,
        }
        return tenure.Worker(url, **settings)

    return make
