"""Late-bound providers: code on a low floor calls them, the top-level package supplies them.

`AsyncStore.lock` / `Store.lock` (floor 3) return a lock of `tenure.locks` (floor 4), which
a floor-3 module must not import. `tenure/__init__.py`, above every floor, registers how to
load it (lazily: the locks bring the worker's lease keeper and anyio), and the store floor
asks here. Nothing else is a seam; add one only for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["locks", "provide_locks"]

_locks: Callable[[], Any] | None = None


def provide_locks(loader: Callable[[], Any]) -> None:
    """Register the loader of the `tenure.locks` module (``tenure/__init__.py`` does)."""
    global _locks
    _locks = loader


def locks() -> Any:
    """The `tenure.locks` module, loaded on first use."""
    if _locks is None:  # pragma: no cover - `import tenure` always registers it
        raise RuntimeError("tenure.locks is not registered: import tenure first")
    return _locks()
