"""The SQLite driver reads the rows of its pick statement by column name."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import tenure
from tenure._protocol import JOB_COLUMNS
from tenure.stores.sqlite import _sql


def test_pick_rows_are_read_by_the_names_of_their_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    tenure.connect(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        cur = conn.execute(_sql.PICK, {"queue": "q", "now": 0.0, "max_generation": 1})
        names = tuple(column[0] for column in cur.description)
    assert names == _sql.Pick._fields


def test_the_claim_and_the_complete_answer_job_rows(tmp_path: Path) -> None:
    # The driver makes JobRows of these two statements' rows without JobRow._make's length
    # check (the hot path of a claim -> complete cycle): their RETURNING lists must be
    # JOB_COLUMNS, in order.
    path = tmp_path / "t.db"
    tenure.connect(f"sqlite:///{path}").close()
    params = {
        "job_id": "none",
        "owner": "w",
        "ttl": 1.0,
        "secret_hash": "h",
        "now": 0.0,
        "max_generation": 1,
        "generation": 1,
        "receipt": "r",
        "result": None,
    }
    with sqlite3.connect(path) as conn:
        for statement in (_sql.CLAIM, _sql.COMPLETE):
            cur = conn.execute(statement, params)
            assert tuple(column[0] for column in cur.description) == JOB_COLUMNS
            assert cur.fetchall() == []
    conn.close()
