-- Claim up to %(limit)s claimable jobs of some queues, highest priority then oldest, in one statement (see
-- _claim_next_ctes.sql). Picked jobs whose expired lease was their last allowed attempt are
-- buried instead, and reported as such: the driver then runs the statement again for the
-- leases still wanted.
{include:_clock},
-- Nothing is completed here before the claim (see _queue_room.sql).
settled AS (SELECT NULL::text AS job_id WHERE false),
{include:_claim_next_ctes}
{include:_claim_next_answer}
ORDER BY position NULLS LAST
