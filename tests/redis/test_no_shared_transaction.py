"""Issue #17: a Redis store cannot take part in a caller's SQL transaction, and says so."""

from __future__ import annotations

import sqlite3

import pytest

import tenure


def test_submit_with_a_connection_is_refused_with_what_to_do(store: tenure.Store) -> None:
    conn = sqlite3.connect(":memory:")
    for call in (
        lambda: store.submit("J", conn=conn),
        lambda: store.submit_many([{"job_id": "J"}], conn=conn),
        lambda: store.submit_many([], conn=conn),  # checked even with nothing to submit
    ):
        with pytest.raises(tenure.InvalidArgument) as caught:
            call()
        assert caught.value.argument == "conn"
        assert "Redis has no transaction to share" in str(caught.value)
        assert "submit after your transaction commits" in str(caught.value)
    with pytest.raises(tenure.JobNotFound):
        store.get("J")
