"""On PostgreSQL the attempt history and the notification of a finished job's waiters are
written by one trigger per statement (migration 0012): a statement that ends the leases of
many jobs calls it once, records each of them and notifies the ones waited for, whoever
wrote the statement. Calls are counted with the server's own function statistics
(``track_functions``) inside the statement's transaction."""

from __future__ import annotations

from typing import Any

import pytest

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


def _claim_and_complete_by_hand(conn: Any, schema: str, job_ids: list[str]) -> None:
    """A claim and then a completion of the jobs, written as a caller's own SQL (the
    trigger runs for any writer) in ``conn``'s session, where the trigger's plans live."""
    conn.execute(
        f'UPDATE "{schema}".tenure_jobs SET state = %s, owner = %s, generation = generation + 1,'
        " attempts = attempts + 1, secret_hash = 'h', lease_until = 1e10, available_at = 1e10,"
        " lease_min_end = 1e10, updated_at = extract(epoch FROM clock_timestamp())"
        " WHERE job_id = ANY(%s)",
        ("leased", "by-hand", job_ids),
    )
    conn.execute(
        f'UPDATE "{schema}".tenure_jobs SET state = %s, secret_hash = NULL, lease_until = NULL,'
        " updated_at = extract(epoch FROM clock_timestamp()) WHERE job_id = ANY(%s)",
        ("done", job_ids),
    )


@pytest.mark.parametrize("recorded_empty_by", ["VACUUM", "ANALYZE"])
def test_the_history_is_probed_by_key_after_its_statistics_said_it_was_empty(
    url: str, schema: str, admin: Any, recorded_empty_by: str
) -> None:
    # A purge empties the history, (auto)vacuum or analyze records it so, a session plans
    # the trigger's statements then, and the history grows again: migration 0014. Before
    # it, each claim and completion of that session scanned the whole history.
    with tenure.connect(url) as store:
        store.submit_many([{"job_id": f"first-{i}"} for i in range(3)])
        admin.execute(f'{recorded_empty_by} "{schema}".tenure_attempts')
        session = postgres_admin()
        try:
            _claim_and_complete_by_hand(session, schema, ["first-0"])  # plans made now
            grown = [f"grown-{i}" for i in range(1000)]
            store.submit_many([{"job_id": job_id} for job_id in grown])
            while leases := store.claim_many("B", 30, 200):
                store.complete_many(leases)
            later = [f"later-{i}" for i in range(10)]
            store.submit_many([{"job_id": job_id} for job_id in later])
            with session.transaction():
                _claim_and_complete_by_hand(session, schema, later)
                seq_scans, rows_fetched = session.execute(
                    "SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables"
                    " WHERE relid = %s::regclass",
                    (f'"{schema}".tenure_attempts',),
                ).fetchone()
        finally:
            session.close()
        assert sum(len(store.attempts(job_id)) for job_id in grown) == len(grown)
        # About one probe by key per lease ended; none of the history's 1,000 other rows
        # read (before migration 0014: 11 scans of the whole history here).
        assert seq_scans == 0
        assert rows_fetched <= 2 * len(later)
        for job_id in later:
            assert [(a.owner, a.ending) for a in store.attempts(job_id)][-1] == (
                "by-hand",
                "completed",
            )
