"""The fence stores of the ASGI middleware (`MemoryFenceStore`, `SQLiteFenceStore`): bad
tokens, flags, paths and timeouts are refused with `InvalidArgument` and change nothing."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure.fence.asgi import MemoryFenceStore, SQLiteFenceStore

JOB = "export/2024 ü"
MAX_GENERATION = 2**63 - 1


def token(generation: int, job: str = JOB) -> tenure.FencingToken:
    return tenure.FencingToken(job, generation)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryFenceStore()
        return
    found = SQLiteFenceStore(tmp_path / "fence.db")
    yield found
    found.close()


def jobs_fenced(store: Any) -> int:
    """How many jobs the store holds a generation for (read without the store's API, which
    takes only valid job ids)."""
    if isinstance(store, MemoryFenceStore):
        return int(repr(store).split()[1])
    return int(
        store.run(lambda conn: conn.execute("SELECT count(*) FROM tenure_fence").fetchone()[0])
    )


@pytest.mark.parametrize(
    ("bad", "argument"),
    [
        (tenure.FencingToken("", -5), "token job_id"),
        (tenure.FencingToken("", 1), "token job_id"),
        (tenure.FencingToken("a\x00b", 1), "token job_id"),
        (tenure.FencingToken("\ud800", 1), "token job_id"),
        (tenure.FencingToken("j" * 256, 1), "token job_id"),
        (tenure.FencingToken(7, 1), "token job_id"),  # type: ignore[arg-type]
        (tenure.FencingToken("j", 0), "token generation"),
        (tenure.FencingToken("j", -5), "token generation"),
        (tenure.FencingToken("j", MAX_GENERATION + 1), "token generation"),
        (tenure.FencingToken("j", 2**64), "token generation"),
        (tenure.FencingToken("j", 2**80), "token generation"),
        (tenure.FencingToken("j", True), "token generation"),
        (tenure.FencingToken("j", 2.0), "token generation"),  # type: ignore[arg-type]
        (tenure.FencingToken("j", "2"), "token generation"),  # type: ignore[arg-type]
        ("x", "token"),
        ("2:j", "token"),
        (None, "token"),
    ],
)
def test_bad_tokens_change_nothing(store: Any, bad: Any, argument: str) -> None:
    assert store.advance(token(5)).accepted
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.advance(bad)
    assert caught.value.argument == argument
    assert jobs_fenced(store) == 1
    assert store.highest(JOB) == 5
    assert store.highest("j") is None
    # The real owner of "j" is not fenced out by the refused token.
    assert store.advance(token(1, "j")).accepted


@pytest.mark.parametrize("strict", ["no", "yes", 0, 1, None])
def test_strict_must_be_a_bool(store: Any, strict: Any) -> None:
    assert store.advance(token(5)).accepted
    with pytest.raises(tenure.InvalidArgument) as caught:
        store.advance(token(6), strict=strict)
    assert caught.value.argument == "strict"
    assert store.highest(JOB) == 5


def test_valid_tokens_still_advance(store: Any) -> None:
    assert store.advance(token(1, "j"), strict=True) == tenure.fence.asgi.FenceVerdict(True, 1)
    top = token(MAX_GENERATION, "j")
    assert store.advance(top, strict=False) == tenure.fence.asgi.FenceVerdict(True, MAX_GENERATION)
    assert store.advance(top) == tenure.fence.asgi.FenceVerdict(True, MAX_GENERATION)
    assert store.advance(top, strict=True) == tenure.fence.asgi.FenceVerdict(False, MAX_GENERATION)
    assert store.advance(token(2, "j")) == tenure.fence.asgi.FenceVerdict(False, MAX_GENERATION)
    assert store.highest("j") == MAX_GENERATION


class _PathLike:
    def __init__(self, path: str | bytes) -> None:
        self.path = path

    def __fspath__(self) -> str | bytes:
        return self.path


@pytest.mark.parametrize(
    "path",
    [
        None,
        42,
        1.5,
        b"fence.db",
        ["fence.db"],
        "",
        ":memory:",
        Path(":memory:"),
        _PathLike(":memory:"),
        "file::memory:",
        "file:fence.db?mode=memory",
        "fence\x00.db",
        _PathLike(""),
        _PathLike(42),  # type: ignore[arg-type]
        tenure,  # neither text nor a path
    ],
)
def test_bad_paths_create_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tenure.InvalidArgument) as caught:
        SQLiteFenceStore(path)
    assert caught.value.argument == "path"
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize(
    "timeout",
    [
        "x",
        "30",
        None,
        True,
        -1,
        -0.5,
        math.nan,
        math.inf,
        367 * 24 * 3600,
        pytest.param(2**2000, id="int-beyond-float"),
    ],
)
def test_bad_timeouts_create_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tenure.InvalidArgument) as caught:
        SQLiteFenceStore("fence.db", timeout=timeout)
    assert caught.value.argument == "timeout"
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize(
    "path", ["fence.db", Path("fence.db"), _PathLike("fence.db"), _PathLike(b"fence.db")]
)
@pytest.mark.parametrize("timeout", [0, 0.5, 30])
def test_valid_paths_and_timeouts_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: Any, timeout: float
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteFenceStore(path, timeout=timeout)
    try:
        assert store.advance(token(3)).accepted
        assert store.highest(JOB) == 3
    finally:
        store.close()
    assert (tmp_path / "fence.db").is_file()
