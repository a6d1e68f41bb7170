-- The running leases of %(owner)s on jobs of %(queues)b whose secret hash is one of
-- %(secret_hashes)b: what a claim whose reply was lost took (only that claim knows those
-- hashes), in claim order (highest priority, then oldest). Changes nothing. Walks the leases held in each queue
-- (tenure_jobs_leased); such a lease ends by now + ttl (it was granted at or before now).
{include:_read_clock}
SELECT 'applied' AS status, j.job_id, j.queue, j.state, j.owner, j.generation, j.secret_hash, j.lease_until, j.available_at, j.attempts, j.max_attempts, j.payload, j.result, j.error, j.created_at, j.updated_at, j.priority, j.timeout, j.unique_key, j.headers, clock.now, false AS raced
FROM clock
JOIN {schema}.tenure_jobs AS j
    ON j.queue = ANY (%(queues)b::text[])
   AND j.state = 'leased' AND j.lease_min_end IS NOT NULL  -- tenure_jobs_leased
   AND j.available_at > clock.now
   AND j.available_at <= clock.now + %(ttl)s::float8
WHERE j.owner = %(owner)s
  AND j.secret_hash = ANY (%(secret_hashes)b::text[])
  AND j.lease_until > clock.now
ORDER BY j.priority DESC, j.available_at, j.seq
