"""What the store URL tests share: a bad URL is refused, with `InvalidArgument` naming
``url``, by every way of opening a store, before any of them opens or creates anything."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

import tenure
import tenure.aio


def refused_on_open(
    url: str,
    words: str,
    parse: Callable[[str], object],
    unchanged: Callable[[], object] = lambda: None,
    *,
    argument: str = "url",
) -> None:
    """``parse`` (the store's URL parser), `tenure.connect`, `tenure.aio.connect` and
    `tenure.Worker` (made, not run) each refuse ``url`` with `InvalidArgument` naming
    ``argument`` (``url``, or e.g. an environment variable the store reads beside it), whose
    rule says ``words``; ``unchanged()`` asserts after each that nothing was created or
    changed (no file, no schema, no key)."""

    async def connect_async() -> None:
        store = await tenure.aio.connect(url)
        await store.close()

    attempts: dict[str, Callable[[], object]] = {
        "parse": lambda: parse(url),
        "connect": lambda: tenure.connect(url).close(),
        "aio.connect": lambda: anyio.run(connect_async),
        "Worker": lambda: tenure.Worker(url=url),
    }
    for entry, attempt in attempts.items():
        with pytest.raises(tenure.InvalidArgument) as caught:
            attempt()
        assert caught.value.argument == argument, f"{entry}: {caught.value}"
        assert words in caught.value.rule, f"{entry}: {caught.value}"
        unchanged()
