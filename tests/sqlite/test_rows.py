"""The SQLite driver reads the rows of its pick statement by column name."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import tenure
from tenure.stores.sqlite import _sql


def test_pick_rows_are_read_by_the_names_of_their_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    tenure.connect(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        cur = conn.execute(_sql.PICK, {"queue": "q", "now": 0.0, "max_generation": 1})
        names = tuple(column[0] for column in cur.description)
    assert names == _sql.Pick._fields
