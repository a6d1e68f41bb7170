"""SQL and Lua live in package data files; this loads them once."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

__all__ = ["load_text", "migrations"]


@cache
def load_text(package: str, name: str) -> str:
    return files(package).joinpath(name).read_text(encoding="utf-8")


@cache
def migrations(package: str, folder: str = "sql/migrations") -> tuple[tuple[int, str, str], ...]:
    """(version, file name, text) for every ``NNNN_name.sql`` in ``folder``, in order.

    Read once per process: every store open checks its schema against them, and reading a
    dozen files cost a SQLite store's open a third of its time."""
    found = []
    for entry in files(package).joinpath(folder).iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return tuple(sorted(found))
