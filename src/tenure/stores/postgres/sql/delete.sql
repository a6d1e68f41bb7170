-- Delete a finished job (done, dead, cancelled), and raise the store's generation floor to
-- its generation in the same statement: a job submitted again under this id is first
-- claimed above it (claim.sql), so no token of the deleted job is ever issued again. Its
-- attempt history is deleted with it.
{include:_clock},
applied AS (
    DELETE FROM {schema}.tenure_jobs AS j
    WHERE j.job_id = %(job_id)s
      AND j.state = ANY (%(takes)b::text[])
    RETURNING j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers
),
floor AS (
    UPDATE {schema}.tenure_floor AS f
    SET generation = greatest(f.generation, (SELECT max(a.generation) FROM applied AS a))
    WHERE f.id = 0 AND EXISTS (SELECT FROM applied)
),
history AS (
    -- Its attempt history goes with it.
    DELETE FROM {schema}.tenure_attempts AS t
    USING applied AS a
    WHERE t.job_id = a.job_id
)
{include:_control_answer}
