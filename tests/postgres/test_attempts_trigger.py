"""On PostgreSQL the attempt history and the notification of a finished job's waiters are
written by one trigger per statement (migration 0012): a statement that ends the leases of
many jobs calls it once, records each of them and notifies the ones waited for, whoever
wrote the statement. Calls are counted with the server's own function statistics
(``track_functions``) inside the statement's transaction."""

from __future__ import annotations

from typing import Any

import tenure
from tests.backends import postgres_admin


def _trigger_calls(conn: Any, schema: str) -> int:
    row = conn.execute(
        "SELECT pg_stat_get_xact_function_calls(%s::regproc)",
        (f'"{schema}".tenure_jobs_updated',),
    ).fetchone()
    return int(row[0] or 0)


def test_a_statement_ending_many_leases_calls_the_trigger_once(
    url: str, schema: str, admin: Any
) -> None:
    job_ids = [f"J{i}" for i in range(5)]
    with tenure.connect(url) as store:
        for job_id in job_ids:
            store.submit(job_id)
        leases = store.claim_many("A", 30, len(job_ids))
        assert sorted(lease.job_id for lease in leases) == job_ids

        # One of the five is waited for (store.wait registers so): only it is notified.
        admin.execute(
            f'INSERT INTO "{schema}".tenure_waiters (waiter, job_id, until) '
            "VALUES ('w1', 'J3', extract(epoch FROM clock_timestamp()) + 60)"
        )
        listener = postgres_admin()
        listener.execute(f'LISTEN "tenure_end_{schema}"')

        with admin.transaction():
            admin.execute("SET LOCAL track_functions = 'pl'")
            # A caller's own SQL, not tenure's: the history follows any writer.
            admin.execute(
                f'UPDATE "{schema}".tenure_jobs SET state = %s, secret_hash = NULL, '
                "lease_until = NULL, error = %s WHERE job_id = ANY(%s)",
                ("cancelled", "stopped by hand", job_ids),
            )
            assert _trigger_calls(admin, schema) == 1
            # An update that starts or ends no lease still runs it, and records nothing.
            admin.execute(
                f'UPDATE "{schema}".tenure_jobs SET payload = %s WHERE job_id = ANY(%s)',
                ("{}", job_ids),
            )
            assert _trigger_calls(admin, schema) == 2

        notified = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
        notified += [n.payload for n in listener.notifies(timeout=0.2)]
        listener.close()
        assert notified == ["J3"]

        for lease in leases:
            (attempt,) = store.attempts(lease.job_id)
            assert (attempt.generation, attempt.owner) == (lease.generation, "A")
            assert attempt.ending == "cancelled"
            assert attempt.error == "stopped by hand"
