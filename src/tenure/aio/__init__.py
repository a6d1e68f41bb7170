"""The async API: the same names as `tenure`, with ``async`` methods.

``store = await tenure.aio.connect(url)``; then ``await store.claim(...)`` and so on. Works
with asyncio and trio (through anyio).
"""

from __future__ import annotations

from .._store_async import AsyncStore, connect

__all__ = ["AsyncStore", "connect"]
