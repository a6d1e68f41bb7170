"""Helpers of the PostgreSQL-specific tests: the driver under a store, leases and
completions made by hand, statement counting, and killing the test's server connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import tenure
from tenure._protocol import Completion, hash_secret, settle_receipt
from tenure.stores.postgres import PostgresDriver


def driver_of(store: tenure.Store) -> PostgresDriver:
    driver = store._driver
    assert isinstance(driver, PostgresDriver)
    return driver


def completion(lease: tenure.Lease, result: str | None = None) -> Completion:
    return Completion(
        lease.job_id,
        lease.owner,
        lease.generation,
        hash_secret(lease.secret),
        settle_receipt(hash_secret(lease.secret), "complete"),
        result,
    )


def claimed_leases(store: tenure.Store, *job_ids: str, owner: str = "A") -> list[tenure.Lease]:
    for job_id in job_ids:
        store.submit(job_id)
    leases = []
    for job_id in job_ids:
        lease = store.claim(job_id, owner, 30)
        assert lease is not None
        leases.append(lease)
    return leases


def count_statements(
    driver: PostgresDriver, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, int]]:
    """(operation, number of completions) of each statement the driver runs from now on."""
    calls: list[tuple[str, int]] = []
    original = driver._rows

    def counting(operation: str, statement: Any, params: dict[str, Any]) -> Any:
        calls.append((operation, len(params.get("job_ids", ()))))
        return original(operation, statement, params)

    monkeypatch.setattr(driver, "_rows", counting)
    return calls


def backends_of(admin: Any, app_name: str) -> list[int]:
    """Server process ids of the connections carrying ``app_name``."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app_name,)
    ).fetchall()
    return [int(row[0]) for row in rows]


def terminate(admin: Any, pids: list[int]) -> None:
    for pid in pids:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def blocked_then_killed(
    admin_url: str,
    admin: Any,
    app_name: str,
    lock_sql: Any,
    job_id: str,
    call: Callable[[], Any],
) -> tuple[Any, BaseException | None]:
    """Run ``call`` while another transaction holds the job's row lock, so that it is
    stuck inside its statement; terminate its backend there; then let the lock go."""
    import psycopg

    result: list[Any] = []
    error: list[BaseException] = []
    with psycopg.connect(admin_url) as blocker:  # not autocommit: the lock is kept
        blocker.execute(lock_sql, (job_id,))

        def run() -> None:
            try:
                result.append(call())
            except BaseException as exc:
                error.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 10
        killed = False
        while not killed and time.monotonic() < deadline:
            rows = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event_type = 'Lock'",
                (app_name,),
            ).fetchall()
            if rows:
                terminate(admin, [int(rows[0][0])])
                killed = True
            else:
                time.sleep(0.005)
        assert killed, "the operation never waited for the row lock"
        time.sleep(0.05)
        blocker.rollback()
    thread.join(10)
    return (result[0] if result else None), (error[0] if error else None)


def wait_for_a_row_lock(admin: Any, app_name: str, who: str) -> None:
    """Until a connection of ``app_name`` waits for a lock (a row's, a transaction's)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        waiting = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND application_name = %s",
            (app_name,),
        ).fetchone()[0]
        if waiting:
            return
        time.sleep(0.005)
    pytest.fail(f"{who} never waited for the row lock")
