-- The items of "todo" (a batch of holder updates: complete_many's, renew_many's) whose
-- lease is held as the item says, checked exactly as the single-job statements check it
-- (leased, same owner, generation and secret hash, lease running by store time), each with
-- the address of its row as this statement's snapshot sees it, in todo's order (by job
-- id). The update then reaches each row by that address, in that order, so it locks rows
-- in job id order: two batches sharing jobs wait for each other instead of deadlocking.
--
-- A loop over the items, one primary-key probe each (LATERAL ... OFFSET 0: a subquery the
-- planner cannot fold into a join), because a join of the batch with the table can be
-- planned the other way round, one read of the batch per row (a generic plan costs an
-- array at ten elements), which for 1,000 items is a million rows
-- (tests/postgres/test_batch_plans.py). No row lock here: it would cost a WAL record per
-- item before the update's own. A row a concurrent writer changed after the snapshot is
-- no longer at that address when the update gets to it (its recheck compares addresses):
-- its item is not applied, and the answer says raced when the snapshot's version matched:
-- the driver runs that item again as the single-job statement, whose update rechecks the
-- lease on the newest version (_unraced_batch in _driver_async.py).
held AS MATERIALIZED (
    SELECT t.*, x.row_id
    FROM todo AS t
    CROSS JOIN clock
    CROSS JOIN LATERAL (
        SELECT j.ctid AS row_id
        FROM {schema}.tenure_jobs AS j
        WHERE j.job_id = t.job_id
          AND j.state = 'leased'
          AND j.owner = t.owner
          AND j.generation = t.generation
          AND j.secret_hash = t.secret_hash
          AND j.lease_until > clock.now
        OFFSET 0
    ) AS x
),
