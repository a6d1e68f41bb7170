-- complete_many.sql, then claim_next.sql, in one statement: one round trip and one commit
-- for a batch worker's "these are done, give me more". The claim's pick reads the same
-- snapshot as the completions, in which a job being completed here is still leased with its
-- lease running (available_at ahead of clock.now), so the pick never takes one; a job whose
-- lease has run out is not completed (lease_until > clock.now fails) and may be picked, as
-- any expired lease may. No row is updated twice.
-- Answer: the completions' rows (part 1, input order), then the claim's (part 2, as
-- claim_next.sql orders them); columns as claim_next.sql's, then part.
{include:_clock},
{include:_complete_many_ctes},
-- The jobs completed here free their queues' room for the claim (see _queue_room.sql).
settled AS (SELECT c.job_id FROM applied AS c),
{include:_claim_next_ctes}
SELECT *, 1 AS part FROM (
{include:_batch_answer}
) AS completions
UNION ALL
SELECT *, 2 FROM (
{include:_claim_next_answer}
) AS claims
ORDER BY part, position NULLS LAST
