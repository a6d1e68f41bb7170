-- Done, by the live lease only. The secret hash gives way to this complete's receipt, so a
-- retried complete is recognised and a release or fail of the ended lease is not.
{include:_clock},
applied AS (
    UPDATE {schema}.tenure_jobs AS j
    SET state = 'done',
        result = %(result)s::text,
        secret_hash = %(receipt)s::text,
        lease_until = NULL,
        available_at = clock.now,
        updated_at = clock.now
    FROM clock
    WHERE j.job_id = %(job_id)s
      AND j.state = 'leased'
      AND j.owner = %(owner)s
      AND j.generation = %(generation)s::bigint
      AND j.secret_hash = %(secret_hash)s
      AND j.lease_until > clock.now
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
)
{include:_holder_answer}
