"""A store backend written against `tenure.stores.abc` alone plugs in with `register_backend`."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import anyio
import pytest

import tenure
import tenure.aio
from tenure.stores import abc, open_driver, register_backend

# A third-party backend: ``counted+sqlite:///path`` is the SQLite store, counting claims.
CLAIMS: list[str] = []


class CountingDriver:
    """Wraps any driver; only the names of `tenure.stores.abc` are used."""

    def __init__(self, inner: abc.Driver) -> None:
        self._inner = inner
        self.store_id = inner.store_id
        self.url = inner.url

    def claim(self, job_id: str, owner: str, ttl: float, secret_hash: str) -> abc.Outcome:
        CLAIMS.append(job_id)
        return self._inner.claim(job_id, owner, ttl, secret_hash)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def _open_sync(url: str, clock: tenure.Clock | None) -> abc.Driver:
    inner = open_driver(url.removeprefix("counted+"), clock)
    return CountingDriver(inner)  # type: ignore[return-value]


async def _open_async(url: str, clock: tenure.Clock | None) -> abc.AsyncDriver:
    return abc.ThreadedDriver(_open_sync(url, clock))


@pytest.fixture
def counted_backend() -> object:
    module = types.ModuleType("counted_backend")
    module.open_sync = _open_sync  # type: ignore[attr-defined]
    module.open_async = _open_async  # type: ignore[attr-defined]
    sys.modules["counted_backend"] = module
    register_backend("counted+sqlite", "counted_backend")
    CLAIMS.clear()
    yield module
    del sys.modules["counted_backend"]


def test_a_backend_from_the_published_contract_serves_sync_and_async_stores(
    counted_backend: object, tmp_path: Path
) -> None:
    assert isinstance(counted_backend, abc.Backend)
    url = f"counted+sqlite:///{tmp_path / 'jobs.db'}"
    with tenure.connect(url) as store:
        store.submit("J")
        lease = store.claim("J", "w", 30)
        assert lease is not None
        store.complete(lease, "ok")
        assert store.get("J").state == tenure.JobState.DONE

    async def main() -> None:
        async with await tenure.aio.connect(url) as store:
            await store.submit("K")
            assert await store.claim("K", "w", 30) is not None

    anyio.run(main)
    assert CLAIMS == ["J", "K"]


@pytest.mark.parametrize(
    "module", ["tenure.stores.sqlite", "tenure.stores.postgres", "tenure.stores.redis"]
)
def test_the_built_in_backends_keep_the_published_contract(module: str) -> None:
    pytest.importorskip(module)
    assert isinstance(importlib.import_module(module), abc.Backend)


def test_a_module_that_is_not_a_backend_is_refused_by_name(tmp_path: Path) -> None:
    module = types.ModuleType("half_backend")
    module.open_sync = _open_sync  # type: ignore[attr-defined]  # no open_async
    sys.modules["half_backend"] = module
    try:
        register_backend("half+sqlite", "half_backend")
        with pytest.raises(TypeError, match=r"half_backend .* tenure\.stores\.abc"):
            tenure.connect(f"half+sqlite:///{tmp_path / 'jobs.db'}")
    finally:
        del sys.modules["half_backend"]


@pytest.mark.parametrize(
    ("scheme", "module", "extra", "argument"),
    [
        (42, "bad_backend", None, "scheme"),
        (None, "bad_backend", None, "scheme"),
        (b"bad+sqlite", "bad_backend", None, "scheme"),
        ("", "bad_backend", None, "scheme"),
        ("Bad+sqlite", "bad_backend", None, "scheme"),
        ("1bad", "bad_backend", None, "scheme"),
        ("bad sqlite", "bad_backend", None, "scheme"),
        ("bad+sqlite", 42, None, "module"),
        ("bad+sqlite", "", None, "module"),
        ("bad+sqlite", "bad..backend", None, "module"),
        ("bad+sqlite", "bad_backend", 42, "extra"),
        ("bad+sqlite", "bad_backend", "", "extra"),
    ],
)
def test_bad_arguments_are_refused_and_nothing_is_registered(
    tmp_path: Path, scheme: object, module: object, extra: object, argument: str
) -> None:
    with pytest.raises(tenure.InvalidArgument) as caught:
        register_backend(scheme, module, extra)  # type: ignore[arg-type]
    assert caught.value.argument == argument
    with pytest.raises(tenure.InvalidArgument, match="unknown store scheme"):
        tenure.connect(f"bad+sqlite:///{tmp_path / 'jobs.db'}")
