"""The few primitives whose sync and async forms differ, named so that the generated sync
code reads naturally: ``await pause(s)`` in async source becomes ``pause_sync(s)``."""

from __future__ import annotations

import time

import anyio

__all__ = ["pause", "pause_sync"]


async def pause(seconds: float) -> None:
    await anyio.sleep(seconds)


def pause_sync(seconds: float) -> None:
    time.sleep(seconds)
