from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.backends import IN_CI

# The stateful conformance test runs once per backend: keep each run to a few seconds.
settings.register_profile(
    "ci",
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=30, stateful_step_count=50, deadline=None)
settings.load_profile("ci" if IN_CI else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "races: real concurrency (OS processes, threads) against a shared store"
    )
