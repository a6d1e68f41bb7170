"""Two openers of one new SQLite file at once, threads of one process (as a worker pool's
first connections, or the fence and the store of one program, meet a file at startup).

Switching a new file to WAL needs it to itself for a moment, and SQLite answers another
opener at that moment with "database is locked" at once, without its busy handler. Before
`tenure._sqlite.enter_wal`, two openers let go together failed on 70 of 300 new files, and
this test failed for both the store and the fence.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tenure
import tenure.fence.asgi

OPENERS = 2
FILES = 100


def _open_store(path: Path) -> Any:
    return tenure.connect(f"sqlite:///{path}")


def _open_fence(path: Path) -> Any:
    return tenure.fence.asgi.SQLiteFenceStore(path)


@pytest.mark.parametrize("opener", [_open_store, _open_fence], ids=["store", "fence"])
def test_openers_of_a_new_file_all_succeed(tmp_path: Path, opener: Callable[[Path], Any]) -> None:
    failures: list[BaseException] = []
    for n in range(FILES):
        path = tmp_path / f"new-{n}.db"
        start = threading.Barrier(OPENERS)

        def open_it(path: Path = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                opener(path).close()
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(OPENERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert failures == []
