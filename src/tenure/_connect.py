"""`tenure.connect`: open a store by URL."""

from __future__ import annotations

import random

from ._clock import Clock, LeaseTiming
from ._protocol import RetryPolicy
from ._store import Store
from ._validate import DEFAULT_PAYLOAD_LIMIT, validate_payload_limit
from .stores import open_sync_driver, resolve_url

__all__ = ["connect"]


def connect(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    store_clock: Clock | None = None,
    timing: LeaseTiming | None = None,
    retry_policy: RetryPolicy | None = None,
    payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
    rng: random.Random | None = None,
) -> Store:
    """Open the store at ``url`` (default: ``TENURE_STORE_URL``, else ``sqlite:///tenure.db``).

    ``clock`` is the client's clock (local lease deadlines are measured on its monotonic
    time). ``store_clock`` replaces the store's own clock: for SQLite that is the host clock
    anyway; for server stores it is a hook for deterministic tests only, never for
    production, where the server's time must decide.
    """
    validate_payload_limit(payload_limit)  # before the store is touched
    driver = open_sync_driver(resolve_url(url), store_clock)
    return Store(
        driver,
        clock=clock,
        timing=timing,
        retry_policy=retry_policy,
        payload_limit=payload_limit,
        rng=rng,
    )
