"""The SQLite-specific tests: ``backend`` pinned to SQLite, so the suite's ``url`` is a
fresh store file of this test's and ``store``/``open_store`` are clients of it."""

from __future__ import annotations

import pytest

from tests.backends import SQLITE, Backend


@pytest.fixture
def backend() -> Backend:
    return SQLITE
