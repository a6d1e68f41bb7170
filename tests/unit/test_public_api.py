"""The curated public names: each resolves, and names that moved still work with a warning."""

from __future__ import annotations

import importlib

import pytest

import tenure
import tenure.fence
from tenure.fence import asgi, headers


@pytest.mark.parametrize(
    "module", ["tenure", "tenure.aio", "tenure.fence", "tenure.fence.headers", "tenure.stores.abc"]
)
def test_every_name_in_all_exists(module: str) -> None:
    loaded = importlib.import_module(module)
    missing = [name for name in loaded.__all__ if not hasattr(loaded, name)]
    assert not missing


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("token_headers", headers),
        ("check_headers", headers),
        ("Rejection", headers),
        ("JOB_HEADER", headers),
        ("SQLiteFenceStore", asgi),
        ("MemoryFenceStore", asgi),
        ("FenceStore", asgi),
    ],
)
def test_a_moved_fence_name_still_works_and_says_where_it_went(name: str, home: object) -> None:
    assert name not in tenure.fence.__all__
    with pytest.warns(DeprecationWarning, match=f"tenure.fence.{name} moved to "):
        found = getattr(tenure.fence, name)
    assert found is getattr(home, name)


def test_an_unknown_fence_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        tenure.fence.nothing_here  # noqa: B018


def test_the_fence_package_is_small() -> None:
    # The names job code reaches for; the wire format and fence stores live in their modules.
    assert len(tenure.fence.__all__) <= 16
