"""complete_many on PostgreSQL: one statement for the batch, answers in input order, the
raced re-run, and connections that die during it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

import tenure
from tenure._protocol import Completion, JobRow, Outcome, Status, hash_secret, settle_receipt
from tests.backends import POSTGRES_URL
from tests.postgres._support import (
    blocked_then_killed,
    claimed_leases,
    completion,
    count_statements,
    driver_of,
    terminate,
    wait_for_a_row_lock,
)
from tests.proxy import Proxy


def _row(answer: Outcome) -> JobRow:
    assert answer.row is not None
    return answer.row


def _table(schema: str) -> sql.Composed:
    return sql.SQL("{}.tenure_jobs").format(sql.Identifier(schema))


def test_one_statement_for_the_batch(
    real_store: tenure.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    leases = claimed_leases(real_store, *(f"J{i:03}" for i in range(200)))
    calls = count_statements(driver_of(real_store), monkeypatch)
    assert real_store.complete_many(leases, [i for i in range(200)]) == []
    assert calls == [("complete_many", 200)]
    assert [job.result for job in real_store.jobs(limit=200)] == list(range(200))


def test_the_batch_commits_all_at_once(
    real_store: tenure.Store, schema: str, admin: Any, app_name: str
) -> None:
    """While one job of the batch is locked by another transaction, none of the batch is
    visible as done: it is one statement, committed once."""
    leases = claimed_leases(real_store, "A", "B", "C")
    done: list[list[tenure.LeaseLost]] = []
    with psycopg.connect(POSTGRES_URL) as blocker:  # not autocommit: the lock is kept
        blocker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE job_id = 'C' FOR UPDATE").format(_table(schema))
        )
        thread = threading.Thread(target=lambda: done.append(real_store.complete_many(leases)))
        thread.start()
        wait_for_a_row_lock(admin, app_name, "complete_many")
        assert {job.job_id: job.state for job in real_store.jobs()} == {
            "A": "leased",
            "B": "leased",
            "C": "leased",
        }
        blocker.rollback()
    thread.join(10)
    assert done == [[]]
    assert {job.state for job in real_store.jobs()} == {"done"}


def test_answers_in_input_order_whatever_happened(
    real_store: tenure.Store, open_real_store: Callable[..., tenure.Store]
) -> None:
    live, stale, repeated, wrong_secret, other = claimed_leases(real_store, "L", "S", "R", "W", "E")
    # S: its lease was taken over (released, claimed by B); R: already completed by the
    # same lease; W: the secret does not match; X: its lease has expired.
    real_store.release(stale)
    assert real_store.claim("S", "B", 30) is not None
    real_store.complete(repeated, "first")
    driver = driver_of(real_store)
    real_store.submit("X")
    expired = real_store.claim("X", "A", 0.2)
    assert expired is not None
    time.sleep(0.3)
    batch = [
        completion(wrong_secret)._replace(secret_hash="0" * 64),
        completion(expired, '"late"'),
        Completion("nobody-has-this", "A", 1, "0" * 64, "1" * 64, None),
        completion(live, '"ok"'),
        completion(repeated, '"again"'),
        completion(stale),
        completion(other, '"e"'),
    ]
    answers = driver.complete_many(batch)
    assert [(a.status, a.row and a.row.job_id) for a in answers] == [
        (Status.MISSED, "W"),
        (Status.MISSED, "X"),
        (Status.MISSING, None),
        (Status.APPLIED, "L"),
        (Status.MISSED, "R"),
        (Status.MISSED, "S"),
        (Status.APPLIED, "E"),
    ]
    rows = [_row(a) for a in answers if a.status != Status.MISSING]
    assert rows[0].state == "leased"  # W as it is: untouched
    assert (rows[1].state, rows[1].result) == ("leased", None)  # X: not done late
    assert (rows[2].state, rows[2].result) == ("done", '"ok"')
    assert (rows[3].state, rows[3].result) == ("done", '"first"')  # R: not done twice
    assert (rows[4].owner, rows[4].generation) == ("B", 2)
    assert len({a.now for a in answers}) == 1  # one statement, one store time
    # Through the store: the repeat counts as done, the others are reported, in order.
    real_store.submit("Y")
    fresh = real_store.claim("Y", "A", 30)
    assert fresh is not None
    lost = real_store.complete_many([expired, stale, fresh, repeated], [None, None, None, "first"])
    assert [error.job_id for error in lost] == ["X", "S"]
    assert real_store.get("Y").state == "done"


def test_a_raced_completion_runs_again_alone(
    real_store: tenure.Store,
    schema: str,
    admin: Any,
    app_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A completion whose job another transaction changes after the statement's snapshot
    (here: the same lease's single complete, committed while the batch waits for the row)
    is run again on its own, as the single-job statement (which rechecks the lease on the
    job's newest version), and answered as the job now is: done by that lease."""
    first, second = claimed_leases(real_store, "A", "B")
    driver = driver_of(real_store)
    calls = count_statements(driver, monkeypatch)
    answers: list[Any] = []
    with psycopg.connect(POSTGRES_URL) as blocker:  # one transaction until commit()
        blocker.execute(
            sql.SQL(
                "UPDATE {} SET state = 'done', result = '\"single\"', lease_until = NULL, "
                "secret_hash = %s WHERE job_id = 'B'"
            ).format(_table(schema)),
            [settle_receipt(hash_secret(second.secret), "complete")],
        )
        thread = threading.Thread(
            target=lambda: answers.append(
                driver.complete_many([completion(first, '"a"'), completion(second, '"b"')])
            )
        )
        thread.start()
        wait_for_a_row_lock(admin, app_name, "complete_many")
        blocker.commit()
    thread.join(10)
    (outcomes,) = answers
    assert calls == [("complete_many", 2), ("complete", 0)]  # 0: one job_id, no job_ids
    assert outcomes[0].status == Status.APPLIED
    assert outcomes[1].status == Status.MISSED
    row = _row(outcomes[1])
    assert (row.state, row.result, row.generation) == ("done", '"single"', 1)
    # Both count as done by their lease (repeats of what each did).
    assert real_store.complete_many([first, second], ["a", "single"]) == []


@pytest.fixture
def kill_during(schema: str, admin: Any, app_name: str) -> Callable[..., Any]:
    lock_sql = sql.SQL("SELECT 1 FROM {} WHERE job_id = %s FOR UPDATE").format(_table(schema))

    def run(job_id: str, call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        return blocked_then_killed(POSTGRES_URL, admin, app_name, lock_sql, job_id, call)

    return run


def test_killed_mid_call_is_unavailable_and_the_retry_is_safe(
    real_store: tenure.Store, kill_during: Callable[..., Any]
) -> None:
    leases = claimed_leases(real_store, "A", "B", "C")
    before = {job.job_id: job.updated_at for job in real_store.jobs()}
    driver = driver_of(real_store)
    batch = [completion(lease, '"r"') for lease in leases]
    result, error = kill_during("B", lambda: driver.complete_many(batch))
    assert result is None
    assert isinstance(error, tenure.StoreUnavailable)
    assert error.outcome_unknown is True
    assert "complete_many" in str(error)
    # Rolled back as a whole: not even the jobs before B in the batch changed.
    assert {job.job_id: job.updated_at for job in real_store.jobs()} == before
    # Through the store the same kill is retried with the same leases.
    lost, error = kill_during("B", lambda: real_store.complete_many(leases, ["a", "b", "c"]))
    assert error is None, error
    assert lost == []
    assert [(job.state, job.generation, job.result) for job in real_store.jobs()] == [
        ("done", 1, "a"),
        ("done", 1, "b"),
        ("done", 1, "c"),
    ]
    # And the pool goes on with a fresh connection.
    assert real_store.complete_many(claimed_leases(real_store, "D")) == []


def test_lost_reply_is_unknown_and_the_retry_is_safe(
    proxied: tuple[Proxy, str],
    open_real_store: Callable[..., tenure.Store],
) -> None:
    proxy, url = proxied
    store = open_real_store(url=url)
    leases = claimed_leases(store, "A", "B")
    driver = driver_of(store)
    proxy.lose_next_reply()
    with pytest.raises(tenure.StoreUnavailable) as caught:
        driver.complete_many([completion(lease, '"first"') for lease in leases])
    assert caught.value.outcome_unknown is True
    assert proxy.replies_lost == 1
    jobs = store.jobs()
    assert [(job.state, job.result) for job in jobs] == [("done", "first"), ("done", "first")]
    # The repeat is recognised (same lease, done): success, nothing changes.
    assert store.complete_many(leases, ["first", "first"]) == []
    assert [job.updated_at for job in store.jobs()] == [job.updated_at for job in jobs]
    # Through the store, a lost reply is retried transparently.
    more = claimed_leases(store, "C", "D")
    proxy.lose_next_reply()
    assert store.complete_many(more) == []
    assert proxy.replies_lost == 2
    assert {job.state for job in store.jobs()} == {"done"}


def test_terminated_idle_connections_are_replaced(
    open_real_store: Callable[..., tenure.Store], admin: Any, app_name: str, url: str
) -> None:
    store = open_real_store()
    leases = claimed_leases(store, "A", "B")
    pids = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app_name,)
    ).fetchall()
    terminate(admin, [int(row[0]) for row in pids])
    time.sleep(0.05)
    assert store.complete_many(leases) == []
