-- The items of "todo" (a batch of holder updates: complete_many's, renew_many's) whose
-- lease is held as the item says, checked exactly as the single-job statements check it
-- (leased, same owner, generation and secret hash, lease running by store time), each with
-- its row's address, locked in todo's order (by job id: two batches sharing jobs wait for
-- each other instead of deadlocking).
--
-- A loop over the items, one primary-key probe each, after which the update reaches each
-- row by its address: a join of the batch with the table can be planned the other way
-- round, one read of the batch per row (a generic plan costs an array at ten elements),
-- which for 1,000 items is a million rows (tests/postgres/test_batch_plans.py). A row a
-- concurrent writer changed after this statement's snapshot is locked as it is now, at an
-- address the snapshot does not see: its item is not applied, and the answer says raced
-- when the snapshot's version matched (the driver runs those items again).
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
        FOR NO KEY UPDATE OF j
    ) AS x
),
