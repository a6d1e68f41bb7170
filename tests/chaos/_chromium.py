"""The browser the report's screenshot tests need, or `unavailable` (skip locally, fail in
CI). ``TENURE_CHROMIUM=none`` hides an installed one, to run these tests as a machine
without Chromium does."""

from __future__ import annotations

from tenure.chaos._report import chromium
from tests.backends import unavailable

MISSING = "Chromium is not installed (apt-get install chromium, or TENURE_CHROMIUM=PATH)"


def require_chromium() -> str:
    found = chromium()
    if found is None:
        unavailable(MISSING)
    assert found is not None  # unavailable() does not return
    return found
