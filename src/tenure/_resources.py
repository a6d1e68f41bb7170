"""SQL and Lua live in package data files; this loads them once."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

__all__ = ["load_text", "migrations"]


@cache
def load_text(package: str, name: str) -> str:
    return files(package).joinpath(name).read_text(encoding="utf-8")


def migrations(package: str, folder: str = "sql/migrations") -> list[tuple[int, str, str]]:
    """(version, file name, text) for every ``NNNN_name.sql`` in ``folder``, in order."""
    found = []
    for entry in files(package).joinpath(folder).iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)
